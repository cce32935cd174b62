"""Human-written durations ("90s", "30m", "2h", "1d", "1h30m") as timedeltas.

Config deadlines (``remind_after: 2h``), ``pause 1d`` votes and intervals
all use this one grammar so a duration means the same thing everywhere.
Every duration is at most ``MAX_DURATION`` (366 days): a longer one is
almost surely a typo, and one far longer would overflow the date arithmetic
of deadlines (a crash on every tick) instead of being refused here.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["MAX_DURATION", "DurationRangeError", "parse_duration", "duration_from_seconds", "format_duration"]

#: The longest duration anything accepts (a pause, a deadline, an interval).
MAX_DURATION = timedelta(days=366)

_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_ORDER = "wdhms"
_PART = re.compile(r"(\d+)([wdhms])")
_WHOLE = re.compile(r"(?:\d+[wdhms])+")

_LIMIT = f"the longest allowed is {MAX_DURATION.days}d (about a year)"
#: More digits than this is over the cap in any unit (and ``int()`` of thousands of digits is refused itself).
_MAX_DIGITS = 9
_HELP = 'write a number followed by a unit s, m, h, d or w, e.g. "90s", "30m", "2h", "1d" or "1h30m"'


class DurationRangeError(ValueError):
    """A well-formed duration that is longer than ``MAX_DURATION``.

    Its own type so a caller that reads free text as "a duration, else a
    note" still refuses ``pause 3000000d`` instead of taking it as a note.
    """


def parse_duration(text: str) -> timedelta:
    """Parse ``text`` into a positive timedelta; ValueError says what a valid one looks like.

    Units must appear at most once and largest first ("1h30m", not "30m1h"),
    so a typo like "1m1m" is caught rather than silently summed.
    """
    if not isinstance(text, str):
        raise ValueError(f"duration must be a string, got {type(text).__name__} {text!r}; {_HELP}")
    cleaned = text.strip().lower().replace(" ", "")
    if not cleaned or not _WHOLE.fullmatch(cleaned):
        raise ValueError(f"invalid duration {text!r}: {_HELP}")
    parts = _PART.findall(cleaned)
    units = [unit for _, unit in parts]
    positions = [_ORDER.index(u) for u in units]
    if positions != sorted(set(positions)):
        raise ValueError(f"invalid duration {text!r}: give each unit once, largest first (e.g. \"1h30m\")")
    if any(len(number.lstrip("0")) > _MAX_DIGITS for number, _ in parts):
        raise DurationRangeError(f"duration {text!r} is too long: {_LIMIT}")
    seconds = sum(int(number) * _SECONDS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ValueError(f"invalid duration {text!r}: it must be longer than zero")
    return _bounded(seconds, repr(text))


def duration_from_seconds(value: float) -> timedelta:
    """A duration given as plain seconds (config files allow ``remind_after: 7200``), bounded alike."""
    if not value > 0:  # also refuses NaN
        raise ValueError(f"duration must be longer than zero, got {value}")
    return _bounded(value, f"{value} seconds")


def _bounded(seconds: float, written: str) -> timedelta:
    """Compared as a number first: building a timedelta of 99999999999 days would itself overflow."""
    if seconds > MAX_DURATION.total_seconds():
        raise DurationRangeError(f"duration {written} is too long: {_LIMIT}")
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """The inverse of ``parse_duration`` for messages ("1h30m"); sub-second parts are dropped."""
    seconds = int(delta.total_seconds())
    if seconds <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)
