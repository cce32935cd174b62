"""Human-written durations ("90s", "30m", "2h", "1d", "1h30m") as timedeltas.

Config deadlines (``remind_after: 2h``), ``pause 1d`` votes and intervals
all use this one grammar so a duration means the same thing everywhere.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["parse_duration", "format_duration"]

_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
_ORDER = "wdhms"
_PART = re.compile(r"(\d+)([wdhms])")
_WHOLE = re.compile(r"(?:\d+[wdhms])+")

_HELP = 'write a number followed by a unit s, m, h, d or w, e.g. "90s", "30m", "2h", "1d" or "1h30m"'


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
    delta = timedelta(**{_UNITS[unit]: int(number) for number, unit in parts})
    if delta <= timedelta(0):
        raise ValueError(f"invalid duration {text!r}: it must be longer than zero")
    return delta


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
