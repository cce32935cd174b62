"""Log setup for the ``loopbot`` command line, with secrets scrubbed and every record on one line.

Library modules only create loggers; this module - called once by the CLI -
decides where lines go. Every handler gets a ``RedactingFilter`` so a token
that slips into a message (an exception text quoting a request, a config
dump) is printed as ``***`` instead of leaking into a terminal or log store.
A ``RepeatFilter`` keeps a failure that recurs every tick (or a client that
repeats a bad request) from flooding the log and the disk under it; a record
may carry a ``repeat_key`` (``extra={"repeat_key": ...}``) so lines that
differ only in a detail (a timestamp's age) count as repeats of each other.

The log is an audit trail, so no input may forge a line of it: the
``OneLineFormatter`` escapes line breaks and other control characters in
every message (``\n`` is printed as the two characters ``\n``), and in the
message of a traceback's exception; only the traceback's own lines, written
by Python, start new lines, each indented. ``LibraryFilter`` keeps the
library that meets outsiders in its place: Bolt (whose lines quote request
bodies) only at WARNING and above, the lines we know translated into a short
sentence and the needless ones dropped.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from types import TracebackType
from typing import TextIO, TypeAlias

from bot.redaction import Redactor

__all__ = [
    "JsonFormatter", "LibraryFilter", "OneLineFormatter", "RedactingFilter", "RepeatFilter", "escape",
    "format_exception", "setup_logging", "REPEAT_INTERVAL",
]

_ExcInfo: TypeAlias = tuple[type[BaseException], BaseException, TracebackType | None]

#: Seconds within which a repeated log line is counted rather than printed.
REPEAT_INTERVAL = 60.0

#: Characters that could end a line in a terminal, a log viewer or a log store, or drive a terminal.
_BREAKS = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)] if c != 0x09}
_BREAKS.update({0x0A: "\\n", 0x0D: "\\r", 0x2028: "\\u2028", 0x2029: "\\u2029"})


def escape(text: str) -> str:
    """``text`` on one line: line breaks and control characters (not tabs) written as escapes."""
    return text.translate(_BREAKS)


def format_exception(exc_info: _ExcInfo) -> str:
    """A traceback whose lines are Python's, indented; each exception's message is escaped onto its line."""
    parts: list[str] = []
    exc: BaseException | None = exc_info[1]
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        summary = traceback.TracebackException(type(exc), exc, exc.__traceback__, capture_locals=False)
        lines = ["Traceback (most recent call last):", *summary.stack.format()] if exc.__traceback__ else []
        message = escape("".join(summary.format_exception_only()).rstrip("\n"))
        parts.insert(0, "\n".join(line.rstrip("\n") for line in [*lines, message]))
        if exc.__cause__ is not None:
            exc = exc.__cause__
            parts.insert(0, "The above exception was the direct cause of the following exception:")
        elif exc.__context__ is not None and not exc.__suppress_context__:
            exc = exc.__context__
            parts.insert(0, "During handling of the above exception, another exception occurred:")
        else:
            exc = None
    return "\n".join("  " + line for part in parts for line in part.splitlines())


class OneLineFormatter(logging.Formatter):
    """``logging.Formatter`` with the message escaped onto one line (see the module docstring)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape(record.message.rstrip())  # uvicorn ends a message with a newline
        return super().formatMessage(record)

    def formatException(self, ei: _ExcInfo) -> str:  # type: ignore[override]  # noqa: N802
        return format_exception(ei)


class JsonFormatter(logging.Formatter):
    """``logging.format: json``: one JSON object a line, for a log store; every line parses.

    ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, and
    ``traceback`` when there is one: JSON escapes every line break, so no
    input can forge a record here either.
    """

    def format(self, record: logging.LogRecord) -> str:
        document = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage().rstrip(),
        }
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = format_exception(record.exc_info)
        if record.exc_text:
            document["traceback"] = record.exc_text
        return json.dumps(document, ensure_ascii=False)


_BOLT_DIR = f"{os.sep}slack_bolt{os.sep}"
#: Bolt's lines that say something to an operator, in our words; None: the line is dropped.
_BOLT_LINES: tuple[tuple[str, str | None], ...] = (
    ("As you gave `client` as well", None),  # at every start: we hand Bolt our client on purpose
    ("Unhandled request", "slack: no listener for a request Slack sent (answered 404)"),  # it quoted the body
)
#: Longest message of an untranslated Bolt line (its own words are short; what makes one long is a body).
_BOLT_MAX = 300


class LibraryFilter(logging.Filter):
    """Bolt's lines only at WARNING and above, in our words where we know them, and cut when long.

    Bolt logs through its own ``slack_bolt.*`` loggers (kept at WARNING by
    ``setup_logging``: its INFO line for a bad signature quoted the whole
    body) and through the logger it was given (``adapters.slack.listeners``'s,
    at INFO for our own lines), so its records are told by the file that
    made them. ``adapters.slack.route`` logs refused requests itself, in one
    short line.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if _BOLT_DIR not in record.pathname:
            return True
        if record.levelno < logging.WARNING:
            return False
        message = record.getMessage()
        for prefix, ours in _BOLT_LINES:
            if message.startswith(prefix):
                if ours is None:
                    return False
                record.msg, record.args = ours, None
                return True
        if len(message) > _BOLT_MAX:
            record.msg, record.args = message[:_BOLT_MAX] + " [cut]", None
        return True


class RedactingFilter(logging.Filter):
    """Replace known secret values and token-shaped strings in every record (``bot.redaction``)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._redactor = Redactor(secrets)

    def redact(self, text: str) -> str:
        return self._redactor.redact(text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:  # anew: another handler may have cached Python's
            record.exc_text = format_exception(record.exc_info)
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
        key = (record.name, record.levelno, str(getattr(record, "repeat_key", message)))
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
    format: str = "text",  # noqa: A002 - the config key's name
) -> RedactingFilter:
    """Send log lines to ``stream`` (stderr), one line a record, secrets redacted; idempotent per process.

    The same line repeated within ``repeat_interval`` seconds is printed
    once, then counted (0 turns that off). ``format``: ``text`` for
    people, ``json`` for one JSON object a line (``logging.format``).
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_loopbot", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._loopbot = True  # type: ignore[attr-defined]
    if format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(LibraryFilter())  # first: what repeats is our translation, and a dropped line costs nothing
    if repeat_interval > 0:
        handler.addFilter(RepeatFilter(repeat_interval, clock=clock))  # before: a dropped line costs no redaction
    redactor = RedactingFilter(secrets)
    handler.addFilter(redactor)
    root.addHandler(handler)
    root.setLevel(level)
    # Third-party chatter that would drown the review lines at INFO.
    for noisy in ("apscheduler", "uvicorn.access", "slack_bolt"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return redactor
