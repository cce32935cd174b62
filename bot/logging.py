"""Log setup for the ``loopbot`` command line, with secrets scrubbed.

Library modules only create loggers; this module - called once by the CLI -
decides where lines go. Every handler gets a ``RedactingFilter`` so a token
that slips into a message (an exception text quoting a request, a config
dump) is printed as ``***`` instead of leaking into a terminal or log store.
A ``RepeatFilter`` keeps a failure that recurs every tick (or a client that
repeats a bad request) from flooding the log and the disk under it.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TextIO

__all__ = ["RedactingFilter", "RepeatFilter", "setup_logging", "REDACTED", "REPEAT_INTERVAL"]

#: Seconds within which a repeated log line is counted rather than printed.
REPEAT_INTERVAL = 60.0

REDACTED = "***"

#: Token shapes that are secret whatever config they came from.
_TOKEN_PATTERNS = (
    re.compile(r"xox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack bot/user/app tokens
    re.compile(r"xapp-[A-Za-z0-9-]{8,}"),  # Slack app-level tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{16,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)


class RedactingFilter(logging.Filter):
    """Replace known secret values and token-shaped strings in every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first so a secret containing another is replaced whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _TOKEN_PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        cleaned = self.redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


class RepeatFilter(logging.Filter):
    """Let the same (logger, level, message) through once per ``interval`` seconds.

    The next copy after the interval says how many were held back, so the
    log still tells how often something happened. ``clock`` (seconds,
    monotonic) is injectable for tests. At most ``max_keys`` distinct lines
    are remembered: lines that differ every time (they carry an id or a
    time) are never repeats, and must not grow the memory of a long-lived
    server.
    """

    def __init__(
        self, interval: float = REPEAT_INTERVAL, *, clock: Callable[[], float] = time.monotonic, max_keys: int = 1024
    ) -> None:
        super().__init__()
        self.interval = interval
        self._clock = clock
        self._max_keys = max_keys
        self._seen: dict[tuple[str, int, str], list[float]] = {}  # key -> [last printed at, suppressed since]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        key = (record.name, record.levelno, message)
        now = self._clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self.interval:
                entry[1] += 1
                return False
            suppressed = int(entry[1]) if entry is not None else 0
            self._seen.pop(key, None)  # re-inserted last: the dict stays in printing order
            self._seen[key] = [now, 0]
            if len(self._seen) > self._max_keys:
                self._forget(now)
        if suppressed:
            record.msg = f"{message} (and {suppressed} more time(s) in the {self.interval:g} s before)"
            record.args = None
        return True

    def _forget(self, now: float) -> None:
        """Drop lines whose interval has passed, and the ones printed longest ago while there are too many.

        The dict is in printing order, so both are at its front: a log of
        lines that all differ (a delivery id each) costs O(1) per line, not a
        walk over every remembered line.
        """
        while self._seen:
            oldest = next(iter(self._seen))
            if len(self._seen) <= self._max_keys and now - self._seen[oldest][0] < self.interval:
                return
            del self._seen[oldest]


def setup_logging(
    *,
    level: int = logging.INFO,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
    repeat_interval: float = REPEAT_INTERVAL,
    clock: Callable[[], float] = time.monotonic,
) -> RedactingFilter:
    """Send log lines to ``stream`` (stderr) with secrets redacted; idempotent per process.

    The same line repeated within ``repeat_interval`` seconds is printed
    once, then counted (0 turns that off).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_loopbot", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._loopbot = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if repeat_interval > 0:
        handler.addFilter(RepeatFilter(repeat_interval, clock=clock))  # first: a dropped line costs no redaction
    redactor = RedactingFilter(secrets)
    handler.addFilter(redactor)
    root.addHandler(handler)
    root.setLevel(level)
    # Third-party chatter that would drown the review lines at INFO.
    for noisy in ("apscheduler", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return redactor
