"""Until when does a pause last? The pure reading of a PAUSE vote's time.

A PAUSE silences reminders, escalation and the default decision until an
aware, future time. A time without a zone is refused, not guessed (it would
be read in nobody's time zone), and so is one too far ahead; the CLI asks
``pause_problem`` first, so its usage error and a vote's refusal say the same.
"""

from __future__ import annotations

import contextlib
import re
from datetime import UTC, datetime, timedelta

from adapters.durations import DurationRangeError, parse_duration

from .review_records import DEFAULT_PAUSE, Vote

__all__ = ["MAX_PAUSE_AHEAD", "pause_until", "pause_problem"]

#: How far ahead ``pause --set until=TIME`` may reach: further is a typo, and near year 9999 the
#: deadline arithmetic after the pause would overflow on every tick.
MAX_PAUSE_AHEAD = timedelta(days=3653)
#: "2031-01-01Z" / "2031-01-01+01:00": a zone with no time before it (Python reads the latter as 01:00, no zone).
_DATE_THEN_ZONE = re.compile(r"\A(\d{4}-\d{2}-\d{2})(Z|[+-]\d{2}:\d{2})\Z", re.IGNORECASE)


def _explicit_until(until: object, now: datetime) -> datetime:
    """An ISO time with a zone, later than ``now`` and not absurdly far; ValueError (the voter's message) otherwise."""
    parsed = _aware_time(until, now)
    written = until.isoformat() if isinstance(until, datetime) else str(until)
    if parsed <= now:
        raise ValueError(
            f"pause until {written!r} is in the past (it is now {now.isoformat(timespec='minutes')}); "
            "give a later time, or a duration such as `pause 2h`"
        )
    if parsed - now > MAX_PAUSE_AHEAD:
        raise ValueError(
            f"pause until {written!r} is more than 10 years ahead; pause until an earlier time, and again when it ends"
        )
    return parsed


def _aware_time(until: object, now: datetime) -> datetime:
    """``until`` as an aware datetime; ValueError with a corrected example otherwise.

    A time without a zone is refused rather than guessed: UTC and the
    voter's local time can differ by hours, and the voter can say which.
    Every example a message suggests parses here (the tests check it).
    """
    written = until.isoformat() if isinstance(until, datetime) else str(until)
    zone_after_date = _DATE_THEN_ZONE.match(written.strip()) if isinstance(until, str) else None
    if zone_after_date:
        date, zone = zone_after_date.groups()
        raise ValueError(f"pause until {written!r} has a zone but no time; write both, e.g. {date}T00:00{zone.upper()}")
    parsed = until if isinstance(until, datetime) else None
    if isinstance(until, str):
        with contextlib.suppress(ValueError):
            parsed = datetime.fromisoformat(until.strip())
    if parsed is None:
        tomorrow = (now.astimezone(UTC) + timedelta(days=1)).date().isoformat()
        raise ValueError(f"pause until {written!r} is not an ISO time, e.g. {tomorrow}T09:00+01:00")
    if parsed.tzinfo is None:
        base = parsed.isoformat(timespec="minutes" if not (parsed.second or parsed.microsecond) else "auto")
        raise ValueError(f"pause until {written!r} has no time zone; add one, e.g. {base}Z (UTC) or {base}+01:00")
    return parsed


def pause_until(vote: Vote, now: datetime) -> datetime:
    """A PAUSE lasts until modifications["until"], else the duration in the feedback, else 24h.

    Feedback that is not a duration is a note; a duration over the cap is
    refused, not read as a note, so ``pause 3000000d`` is never a 24h pause.
    """
    if "until" in vote.modifications:  # given empty (an unset shell variable) is a mistake, not "24h"
        if vote.modifications["until"] in (None, ""):
            raise ValueError("pause until '' is empty; give a time such as 2031-01-01T09:00Z, or leave --set until out")
        return _explicit_until(vote.modifications["until"], now)
    words = vote.feedback.split()
    if words:
        try:
            return now + parse_duration(words[0])
        except DurationRangeError:
            raise
        except ValueError:
            pass  # free text, not a duration: the default pause applies
    return now + DEFAULT_PAUSE


def pause_problem(until: object, now: datetime) -> str | None:
    """Why ``pause --set until=...`` is refused (no zone, passed, too far ahead), else None: the CLI says it first."""
    try:
        _explicit_until(until, now)
    except ValueError as err:
        return str(err)
    return None
