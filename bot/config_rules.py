"""The rules one config value must follow, which the models of ``bot.config_blocks`` apply.

Kept apart from the models so they read as declarations, and so that
``bot.scheduler`` translates a crontab line as the config check did
(``crontab_to_apscheduler``) without importing pydantic. Each raises
ValueError with the words a config author reads.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from adapters.durations import duration_from_seconds, parse_duration
from adapters.suggest import did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from loop_engine.checkpoint_config import CheckpointConfig

__all__ = [
    "duration",
    "check_timezone",
    "check_loop_name",
    "check_factory",
    "crontab_to_apscheduler",
    "check_cron",
    "checkpoint_config",
    "check_web_secret",
    "check_base_url",
    "WEB_BASE_URL",
    "WEB_LINK_TTL",
]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NUMERIC_DAYS = re.compile(r"\A(?:\*|\d(?:-\d)?)(?:/\d+)?\Z")
#: An http(s) address without query, fragment or the characters that end a Slack or markdown link.
_BASE_URL = re.compile(r"\Ahttps?://[^\s/?#|<>()\[\]]+(/[^\s?#|<>()\[\]]*)?\Z")
#: ``web.base_url`` and ``web.link_ttl`` when the config leaves them out.
WEB_BASE_URL = "http://127.0.0.1:8000"
WEB_LINK_TTL = timedelta(days=30)


def duration(value: Any) -> Any:
    """Durations are "30m"-style strings or plain seconds, bounded by ``MAX_DURATION`` either way.

    The bound is checked here, at load, so ``check`` refuses a deadline that
    would overflow the date arithmetic of every tick. Anything else is
    returned as it is, for the model's own timedelta check.
    """
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return duration_from_seconds(value)
    return value


def check_timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown timezone {name!r}; use an IANA name like UTC or Europe/Berlin") from err
    return name


def check_loop_name(value: str) -> str:
    if not _SLUG.match(value):
        raise ValueError(f"{value!r} is not a loop name: use lower-case letters, digits, - and _ (e.g. daily-triage)")
    return value


def check_factory(value: str) -> str:
    if not _FACTORY.match(value):
        raise ValueError(f"factory {value!r} must look like package.module:callable")
    return value


def _expand_days(item: str) -> list[int]:
    """One crontab day-of-week item ("1-5", "*/2", "0") as Sunday-based day numbers."""
    body, _, step_text = item.partition("/")
    step = int(step_text) if step_text else 1
    if step < 1:
        raise ValueError(f"day-of-week step must be at least 1 in {item!r}")
    if body == "*":
        first, last = 0, 6
    else:
        first_text, _, last_text = body.partition("-")
        first, last = int(first_text), int(last_text or first_text)
    if not (0 <= first <= 7 and 0 <= last <= 7) or first > last:
        raise ValueError(f"day-of-week {item!r} is out of range: use 0-7 (0 and 7 are Sunday) or names like mon-fri")
    return [day % 7 for day in range(first, last + 1, step)]


def crontab_to_apscheduler(expression: str) -> str:
    """Translate numeric day-of-week items (crontab: 0 and 7 = Sunday) into names.

    APScheduler's ``CronTrigger.from_crontab`` reads day 0 as Monday, so
    ``1-5`` would run Tuesday to Saturday; names mean the same everywhere.
    Names and ``*`` pass through unchanged.
    """
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"cron expression {expression!r} must have 5 fields (minute hour day month day-of-week)")
    items = fields[4].split(",")
    if fields[4] == "*" or not any(_NUMERIC_DAYS.match(item) for item in items if item != "*"):
        return expression
    days: list[str] = []
    for item in items:
        names = [_DAY_NAMES[d] for d in _expand_days(item)] if _NUMERIC_DAYS.match(item) else [item.lower()]
        days += [name for name in names if name not in days]
    return " ".join([*fields[:4], ",".join(days)])


def check_cron(value: str) -> str:
    """The expression as APScheduler reads it (day names, see ``crontab_to_apscheduler``), checked by APScheduler.

    APScheduler is imported here, not at the top: only the commands that
    validate loops (check, serve, run) read a ``schedule:``.
    """
    from apscheduler.triggers.cron import CronTrigger

    try:
        expression = crontab_to_apscheduler(value.strip())
        CronTrigger.from_crontab(expression, timezone=ZoneInfo("UTC"))
    except ValueError as err:
        raise ValueError(f"invalid cron expression {value!r}: {err}") from err
    return expression


def checkpoint_config(preset: str | None, fields: dict[str, Any]) -> CheckpointConfig:
    """A loop's ``checkpoint:`` block as the engine's config: the preset's, with ``fields`` overriding it."""
    # here, not at the top: most configs have no checkpoint: block
    from loop_engine.checkpoint_config import CheckpointConfig, CheckpointPresets
    from loop_engine.errors import ConfigurationError

    known = [name for name in CheckpointConfig.__dataclass_fields__]
    unknown = [key for key in fields if key not in known]
    if unknown:
        hints = [f"{key!r}" + did_you_mean(key, known) for key in unknown]
        raise ValueError(f"unknown checkpoint key(s) {', '.join(hints)}; known: preset, {', '.join(known)}")
    base = getattr(CheckpointPresets, preset)() if preset else CheckpointConfig()
    try:
        return CheckpointConfig(**{**base.__dict__, **fields})
    except ConfigurationError as err:
        raise ValueError(str(err)) from err


def check_web_secret(value: str) -> str:
    """``web.secret`` and ``web.token``: long enough that guessing one is hopeless."""
    if len(value) < 16:
        raise ValueError("must be at least 16 characters (e.g. `openssl rand -hex 32`)")
    return value


def check_base_url(value: str) -> str:
    """``web.base_url``: the public http(s) address the review links name, e.g. https://bot.example.com."""
    if not _BASE_URL.match(value):
        raise ValueError(f"expected an http(s) address like https://bot.example.com (no query or spaces), "
                         f"got {value[:100]!r}")
    return value
