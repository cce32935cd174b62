"""How long may an upstream make loopbot wait? Its ``Retry-After`` as finite seconds within the backoff bounds.

Slack and GitHub name their waits in headers (``Retry-After``, a rate limit's
reset time) that anything on the path can write. ``inf``, ``1e20``, ``nan``
and ``-5`` all parse as floats, and the first three then overflow a
``timedelta`` or poison a schedule with NaN - which once killed a channel's
outbox worker for good. So every wait that came from outside passes through
here before any arithmetic: a number that is not finite, or no number at
all, is no wait (the caller's own default applies), and the rest is clamped
to ``[0, MAX_WAIT]``, the outbox's longest backoff.
"""

from __future__ import annotations

import math

__all__ = ["MAX_WAIT", "clamp_wait", "parse_wait"]

#: The longest wait any upstream can ask for (10 minutes, the outbox's ``MAX_BACKOFF``); longer asks are cut to it.
MAX_WAIT = 600.0


def clamp_wait(seconds: float | None) -> float | None:
    """``seconds`` within ``[0, MAX_WAIT]``; None for None or NaN (no usable wait). ``inf`` is ``MAX_WAIT``."""
    if seconds is None or math.isnan(seconds):
        return None
    return min(max(float(seconds), 0.0), MAX_WAIT)


def parse_wait(raw: object) -> float | None:
    """A header's value (``"30"``, ``"1e20"``, ``b"inf"``, ``["5"]``) as a clamped wait, or None when unusable."""
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else None
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    if raw is None:
        return None
    try:
        return clamp_wait(float(str(raw).strip()))
    except ValueError:
        return None
