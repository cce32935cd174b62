"""What runs when: each loop's schedule in words, its time zone, its next run and its last run's outcome.

``loopbot loops`` and Slack's ``/loopbot loops`` compute the next run time
from the loop's own trigger (APScheduler's ``get_next_fire_time``, imported
only then); ``status`` must start without APScheduler (its start-up budget,
tests/bot/test_cli_imports.py), so it reads the next run times a ``serve``
stored in its job store (``state_dir/jobs.sqlite``) with the standard
library. The clock is the caller's, so a test can stand at a DST change.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

if TYPE_CHECKING:  # pragma: no cover
    from bot.config_memo import LoopSchedule as _Loop

__all__ = ["loops_lines", "next_times", "stored_next_times", "schedule_words", "ago"]

_DAYS = {"mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday", "fri": "Friday",
         "sat": "Saturday", "sun": "Sunday"}


class _Run(Protocol):
    """A ``RunRecord`` as far as the listing reads it."""

    id: str
    loop: str
    status: str
    updated_at: datetime


def _duration(seconds: float) -> str:
    """Whole minutes from an hour on ("20h36m", not "20h36m21s")."""
    from adapters.durations import format_duration  # small; only a listing needs it

    rounded = round(seconds / 60) * 60 if seconds >= 3600 else round(seconds)
    return format_duration(timedelta(seconds=max(1, rounded)))


def ago(delta: timedelta) -> str:
    """"5m ago", "just now"."""
    return "just now" if delta.total_seconds() < 1 else f"{_duration(delta.total_seconds())} ago"


def _days(field: str) -> str | None:
    """``mon-fri`` or ``mon,tue,wed,thu,fri`` -> "Monday to Friday", ``mon,wed`` -> "Monday and Wednesday";
    None when it is not that simple."""
    if field == "*":
        return "every day"
    order = list(_DAYS)
    days: list[int] = []
    for part in field.lower().split(","):
        first, _, last = part.partition("-")
        if first not in _DAYS or (last and last not in _DAYS) or (last and order.index(last) < order.index(first)):
            return None
        days += range(order.index(first), order.index(last or first) + 1)
    if len(days) >= 3 and days == list(range(days[0], days[-1] + 1)):
        return f"{_DAYS[order[days[0]]]} to {_DAYS[order[days[-1]]]}"
    words = [_DAYS[order[day]] for day in days]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _cron_words(cron: str) -> str:
    """The common shapes in words ("at 09:00, Monday to Friday"); any other line as it is written."""
    fields = cron.split()
    if len(fields) == 5 and fields[2] == "*" and fields[3] == "*":
        minute, hour, days = fields[0], fields[1], _days(fields[4])
        if days is not None and minute.isdigit() and hour.isdigit():
            return f"at {int(hour):02d}:{int(minute):02d}, {days}"
        if days is not None and minute.isdigit() and hour == "*":
            return f"every hour at :{int(minute):02d}, {days}"
    return f"cron {cron}"


def schedule_words(loop: _Loop, default_zone: str) -> tuple[str, str | None]:
    """(the schedule in words, its time zone - None for an interval or no schedule)."""
    if loop.cron:
        return _cron_words(loop.cron), loop.timezone or default_zone
    if loop.interval:
        return f"every {_duration(loop.interval)}", None
    return "on request only (no schedule)", None


def next_times(loops: Iterable[_Loop], default_zone: str, now: datetime) -> dict[str, datetime | None]:
    """Each scheduled loop's next run after ``now``, from its trigger (this loads APScheduler)."""
    from bot.scheduler import build_trigger

    found: dict[str, datetime | None] = {}
    for loop in loops:
        if not (loop.cron or loop.interval):
            continue
        schedule = _Schedule(loop.cron, loop.interval, loop.timezone)
        trigger, _ = build_trigger(schedule, default_zone)
        if loop.interval:  # an interval counts from when serve started it: from now, as a fresh start would
            found[loop.name] = now + timedelta(seconds=loop.interval)
        else:
            found[loop.name] = trigger.get_next_fire_time(None, now)
    return found


class _Schedule:
    """``build_trigger``'s view of a schedule (interval in seconds)."""

    def __init__(self, cron: str | None, interval: float | None, timezone: str | None) -> None:
        self.cron, self.interval, self.timezone = cron, interval, timezone


def stored_next_times(state_dir: str | Path) -> dict[str, datetime | None] | None:
    """The next run times a ``serve`` stored in ``state_dir/jobs.sqlite``; None when there is no job store."""
    path = Path(state_dir) / "jobs.sqlite"
    if not path.is_file():
        return None
    with contextlib.suppress(sqlite3.Error):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            rows = connection.execute("SELECT id, next_run_time FROM apscheduler_jobs").fetchall()
        finally:
            connection.close()
        return {str(job).removeprefix("loop:"): None if at is None else datetime.fromtimestamp(at, UTC)
                for job, at in rows if str(job).startswith("loop:")}
    return None


def _when(at: datetime, zone: str, now: datetime) -> str:
    local = at.astimezone(ZoneInfo(zone))
    wait = (at - now).total_seconds()
    relative = f"in {_duration(wait)}" if wait >= 1 else "due now"
    return f"{local.strftime('%Y-%m-%d %H:%M %Z')} ({relative})"


def loops_lines(loops: Sequence[_Loop], default_zone: str, runs: Iterable[_Run], now: datetime,
                upcoming: Mapping[str, datetime | None] | None) -> list[str]:
    """One line per loop: schedule in words and zone; next run; last run's outcome and how long ago.

    ``upcoming`` is None when the next times are unknown (no serve has stored them).
    """
    last: dict[str, _Run] = {}
    for run in sorted(runs, key=lambda r: r.updated_at):
        last[run.loop] = run
    lines: list[str] = []
    for loop in loops:
        words, zone = schedule_words(loop, default_zone)
        parts = [f"{words}" + (f" ({zone})" if zone else "")]
        if loop.cron or loop.interval:
            at = None if upcoming is None else upcoming.get(loop.name)
            if at is not None:
                parts.append("next " + _when(at, zone or default_zone, now))
            else:
                parts.append("next: not known until `loopbot serve` schedules it" if upcoming is None
                             else "next: none")
        latest = last.get(loop.name)
        parts.append(f"last run {latest.id} {latest.status} {ago(now - latest.updated_at)}" if latest
                     else "never run yet")
        lines.append(f"- {loop.name}: " + "; ".join(parts))
    return lines or ["no loops configured"]
