"""What a failed GitHub call means to the outbox: PyGithub's errors as ``ChannelError`` (``client`` raises them).

Rate limits (403 secondary / primary, 429) carry ``retry_after``: from
``Retry-After``, else ``x-ratelimit-reset`` minus now, else 60 s; 5xx, 401
and 408 are retryable; 404 / 410, 422 and other 4xx are permanent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from github import GithubException

from ..channel import ChannelError
from ..waits import clamp_wait, parse_wait

__all__ = ["DEFAULT_RATE_LIMIT_WAIT", "channel_error", "header", "rate_limit_wait"]

#: Wait asked of the outbox when a rate limit names no time of its own.
DEFAULT_RATE_LIMIT_WAIT = 60.0


def header(headers: Mapping[str, Any] | None, name: str) -> str | None:
    """A response header by name, in any case (the headers may come as a plain dict, not a case-blind one)."""
    for key, value in (headers or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def _finite(text: str | None) -> float | None:
    """A header's number when it is one and finite (a reset time in epoch seconds), else None."""
    try:
        number = float(text) if text is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def rate_limit_wait(status: int, headers: Mapping[str, Any] | None, message: str, now: float) -> float | None:
    """Seconds to wait when this response is a rate limit, else None; always finite, within ``adapters.waits``'s bounds.

    The headers are clamped before any arithmetic: ``Retry-After: inf`` or a
    reset of ``1e20`` is the longest wait, ``nan`` or garbage no wait of its own.
    """
    remaining = header(headers, "x-ratelimit-remaining")
    limited = status == 429 or (
        status == 403 and ("rate limit" in message.lower() or remaining == "0" or header(headers, "retry-after"))
    )
    if not limited:
        return None
    retry_after = parse_wait(header(headers, "retry-after"))
    if retry_after is not None:
        return retry_after
    reset = _finite(header(headers, "x-ratelimit-reset")) if remaining == "0" else None
    if reset is not None:
        return clamp_wait(max(reset - now, 1.0))
    return DEFAULT_RATE_LIMIT_WAIT


def channel_error(exc: GithubException, what: str, now: float) -> ChannelError:
    """The ChannelError the outbox understands for one failed GitHub call."""
    data = exc.data if isinstance(exc.data, dict) else {}
    message = str(data.get("message") or exc.message or "")
    status = exc.status
    wait = rate_limit_wait(status, exc.headers, message, now)
    text = f"GitHub {what}: HTTP {status}" + (f" {message}" if message else "")
    if wait is not None:
        return ChannelError(f"{text} (rate limited; retry in {wait:.0f}s)", retry_after=wait)
    if status >= 500 or status in (401, 408):
        return ChannelError(text)  # 401: an App token refreshes; a revoked token is fixed in config
    return ChannelError(text, permanent=True)
