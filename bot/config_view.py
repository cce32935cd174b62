"""What `status` and `decide` read from the config, vouched for without pydantic when it can be.

Importing pydantic and building the config models took ~0.1 s, more than
the rest of `status` (issue 13). ``load_view`` reads the file as
``load_config`` does (``bot.config_file``), then ``_vouch`` checks the data
key by key against the same models, by the same value rules
(``bot.config_rules``), and builds the view itself. It only ever says
"valid" or "not sure": any shape it does not know for certain (a value the
models would coerce, a ``store:`` block) is "not sure", and then - as for
every invalid config - the models validate the data, so the configs
accepted and the errors printed are exactly ``load_config``'s.
tests/bot/test_config_view.py holds the check to that against the models.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config_file import read_config, resolve_state_dir
from .config_rules import (
    check_cron,
    check_factory,
    check_loop_name,
    check_timezone,
    checkpoint_config,
    duration,
    person_accounts,
)

if TYPE_CHECKING:  # pragma: no cover
    from .config import BotConfig
    from .config_blocks import StoreConfig
    from .desk.people import PersonEntry

__all__ = ["ConfigView", "Person", "load_view"]

#: The secret keys of each channel block (``SecretStr`` in bot.config_blocks), whose values status redacts.
_SECRET_KEYS = {
    "slack": ("bot_token", "signing_secret", "app_token"),
    "github": ("token", "private_key", "webhook_secret"),
}


@dataclass(frozen=True)
class Person:
    """A ``people:`` entry, as ``bot.config_blocks.PersonConfig`` holds it."""

    name: str
    local: str | None = None
    slack: str | None = None
    github: str | None = None

    def accounts(self) -> list[str]:
        return person_accounts(self)


@dataclass(frozen=True)
class ConfigView:
    """The keys of a valid config that `status` and `decide` use."""

    state_dir: Path  #: absolute
    people: tuple[PersonEntry, ...]
    secrets: tuple[str, ...]  #: every secret's plain value, for redaction; never print these
    store: StoreConfig | None = None  #: the PostgreSQL store; None: SQLite in state_dir (loopbot.db)

    def secret_values(self) -> Iterator[str]:
        """As ``BotConfig.secret_values``."""
        return iter(self.secrets)

    @classmethod
    def of(cls, config: BotConfig) -> ConfigView:
        return cls(config.state_dir, tuple(config.people), tuple(config.secret_values()), config.store)


def load_view(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> ConfigView:
    """``ConfigView.of(load_config(path, environ))``, without pydantic for a config ``_vouch`` knows to be valid."""
    env = os.environ if environ is None else environ
    read = read_config(path, env)
    view = _vouch(read.data, path)
    if view is None:
        from .config import validate_config

        view = ConfigView.of(validate_config(read, path, env))
    return view


# -- the check: each one is True only for a value the model certainly takes as it is ----------------------

Check = Callable[[Any], bool]


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _flag(value: Any) -> bool:
    return type(value) is bool


class _Optional:
    """None, or a value passing ``check`` (a class, not a lambda, so the key test can look inside)."""

    def __init__(self, check: Check) -> None:
        self.check = check

    def __call__(self, value: Any) -> bool:
        return value is None or self.check(value)


class _List:
    """A list whose every item passes ``check``."""

    def __init__(self, check: Check) -> None:
        self.check = check

    def __call__(self, value: Any) -> bool:
        return type(value) is list and all(self.check(item) for item in value)


def _one_of(*words: str) -> Check:
    return lambda value: isinstance(value, str) and value in words


def _integer(lowest: int | None = None, highest: int | None = None) -> Check:
    """An int, or ASCII digits (``${PORT}`` is text), within the bounds."""

    def check(value: Any) -> bool:
        if isinstance(value, str) and re.fullmatch(r"[0-9]{1,18}", value):
            value = int(value)
        return (type(value) is int and (lowest is None or value >= lowest)
                and (highest is None or value <= highest))

    return check


def _number(above: float) -> Check:
    """A finite int or float, more than ``above``."""
    return lambda value: type(value) in (int, float) and math.isfinite(value) and value > above


def _ruled(rule: Callable[[Any], object], kinds: tuple[type, ...] = (str,)) -> Check:
    """A value of ``kinds`` that ``rule`` (from bot.config_rules) takes without raising."""

    def check(value: Any) -> bool:
        if not isinstance(value, kinds) or isinstance(value, bool):
            return False
        try:
            rule(value)
        except Exception:  # whatever the models would make of it, they say it themselves
            return False
        return True

    return check


class _Block:
    """A mapping with only ``fields`` (``required`` among them), each value passing its check, then ``rule``.

    ``fields`` is kept for the test that holds each block to its model's keys.
    """

    def __init__(self, fields: Mapping[str, Check], required: tuple[str, ...] = (), rule: Check | None = None) -> None:
        self.fields, self.required, self.rule = fields, required, rule

    def __call__(self, value: Any) -> bool:
        return (
            type(value) is dict and value.keys() <= self.fields.keys() and all(key in value for key in self.required)
            and all(self.fields[key](item) for key, item in value.items()) and (self.rule is None or self.rule(value))
        )


def _checkpoint(value: Any) -> bool:
    """``{preset: ...}`` and/or the engine's checkpoint fields: CheckpointBlock keeps other keys for the rule."""
    if type(value) is not dict or not all(isinstance(key, str) for key in value):
        return False
    preset = value.get("preset")
    if preset is not None and not _one_of("manual_only", "conservative", "production", "disabled")(preset):
        return False
    try:
        checkpoint_config(preset, {key: item for key, item in value.items() if key != "preset"})
    except Exception:  # as in _ruled
        return False
    return True


def _exactly_one(value: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return sum(value.get(key) is not None for key in keys) == 1


_DURATION = _Optional(_ruled(duration, (str, int, float)))
_TARGET = _Block(
    {
        "slack": _Optional(_Block({"channel": _text}, required=("channel",))),
        "github": _Optional(_Block(
            {"repository": lambda v: isinstance(v, str) and bool(re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", v)),
             "issue": _Optional(_integer(1))},
            required=("repository",),
        )),
        "local": _Optional(_Block({})),
    },
    rule=lambda target: _exactly_one(target, ("slack", "github", "local")),
)
_NAMES = _Optional(_List(_text))
_REVIEW = _Block({
    "post_to": _List(_TARGET),
    "reviewers": _Optional(_Block({
        "people": _NAMES, "slack_users": _NAMES, "slack_groups": _NAMES, "github_users": _NAMES,
        "github_teams": _NAMES, "local": _NAMES,
        "github_min_permission": _Optional(_one_of("read", "triage", "write", "maintain", "admin")),
    })),
    "approvals_required": _integer(1),
    "timeout": _Block(
        {
            "remind_after": _DURATION, "escalate_after": _DURATION, "decide_after": _DURATION,
            "escalate_to": _List(_TARGET), "default": _one_of("reject", "pause", "approve"),
            "allow_default_approve": _flag,
        },
        rule=lambda t: (t.get("default") != "approve" or t.get("allow_default_approve") is True)
        and (t.get("escalate_after") is None or bool(t.get("escalate_to"))),
    ),
})
_SCHEDULE = _Block(
    {"cron": _ruled(check_cron), "timezone": _Optional(_ruled(check_timezone)),
     "interval": _ruled(duration, (str, int, float))},
    rule=lambda s: ("cron" in s) != ("interval" in s) and not ("interval" in s and "timezone" in s),
)
_LOOP = _Block(
    {
        "name": _ruled(check_loop_name),
        "pattern": _Optional(_text),
        "factory": _Optional(_ruled(check_factory)),
        "schedule": _Optional(_SCHEDULE),
        "run_on_start": _flag,
        "overlap": _one_of("skip", "allow"),
        "options": lambda v: type(v) is dict and all(isinstance(key, str) for key in v),
        "checkpoint": _Optional(_checkpoint),
        "review": _REVIEW,
    },
    required=("name",),
    rule=lambda loop: (loop.get("pattern") is None) != (loop.get("factory") is None),
)
_PERSON = _Block(
    {"name": lambda v: isinstance(v, str) and len(v) > 0, "local": _Optional(_text), "slack": _Optional(_text),
     "github": _Optional(_text)},
    required=("name",),
)
_CONFIG = _Block({
    "state_dir": _text,
    "timezone": _ruled(check_timezone),
    "server": _Block({"host": _text, "port": _integer(0, 65535)}),
    "slack": _Optional(_Block(
        {"bot_token": _text, "signing_secret": _Optional(_text), "app_token": _Optional(_text),
         "api_base_url": _text, "command": _text},
        required=("bot_token",),
        rule=lambda s: s.get("app_token") is not None or s.get("signing_secret") is not None,
    )),
    "github": _Optional(_Block(
        {"token": _Optional(_text), "app_id": _Optional(_integer()), "private_key": _Optional(_text),
         "installation_id": _Optional(_integer()), "webhook_secret": _Optional(_text), "base_url": _text,
         "poll_interval": _DURATION},
        rule=lambda g: (
            all(g.get(key) is not None for key in ("app_id", "private_key", "installation_id"))
            if g.get("token") is None
            else all(g.get(key) is None for key in ("app_id", "private_key", "installation_id"))
        ),
    )),
    "scheduler": _Block({"misfire_grace_time": _Optional(_integer(1)), "poll_interval": _number(0)}),
    "loops": _List(_LOOP),
    "people": _List(_PERSON),
    "store": lambda v: v is None,  # PostgreSQL: the models read the block (its URL, schema and lease)
})


def _across(data: dict[str, Any], people: tuple[Person, ...]) -> bool:
    """BotConfig's checks across blocks: one name per person and person per account, known reviewer
    people, unique loop names, and no post to a channel whose top-level block is missing."""
    names = [person.name.casefold() for person in people]
    accounts = [account.casefold() for person in people for account in person.accounts()]
    if len(set(names)) < len(names) or len(set(accounts)) < len(accounts):
        return False
    loops = data.get("loops", [])
    if len({loop["name"] for loop in loops}) < len(loops):
        return False
    for loop in loops:
        review = loop.get("review", {})
        named = (review.get("reviewers") or {}).get("people") or []
        if any(name.casefold() not in names for name in named):
            return False
        targets = [*review.get("post_to", []), *review.get("timeout", {}).get("escalate_to", [])]
        if any(target.get(kind) is not None and data.get(kind) is None
               for target in targets for kind in ("slack", "github")):
            return False
    return True


def _vouch(data: dict[str, Any], path: str | os.PathLike[str]) -> ConfigView | None:
    """The view of ``data`` when it is certainly a valid config, else None (the models must judge)."""
    if not _CONFIG(data):
        return None
    people = tuple(Person(**entry) for entry in data.get("people", []))
    if not _across(data, people):
        return None
    secrets = tuple(
        value for kind, keys in _SECRET_KEYS.items() for key in keys
        if (value := (data.get(kind) or {}).get(key))
    )
    return ConfigView(resolve_state_dir(Path(data.get("state_dir", "./state")), path), people, secrets)
