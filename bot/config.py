"""The bot's config as pydantic models: validate what ``bot.config_file`` read, explain mistakes.

``load_config(path, environ)`` reads the file (``bot.config_file``: YAML,
``${ENV}``) and returns a ``BotConfig`` (pydantic v2, unknown keys refused so
typos surface) or raises ``ConfigError`` whose lines read
``config.yaml: loops[1].schedule.cron: <what is wrong>``. Secrets are
``SecretStr``: they never show in repr/str, ``redacted()`` or ``summary()``.
Keys are design.md's "Contracts" plus bot_contract.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from .config_file import (
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    ConfigData,
    ConfigError,
    read_config,
    resolve_state_dir,
    substitute_env,
)
from .config_blocks import (
    CheckpointBlock,
    Duration,
    GitHubConfig,
    GitHubTarget,
    LocalTarget,
    LoopConfig,
    PersonConfig,
    PostTarget,
    ReviewConfig,
    ReviewersConfig,
    ScheduleConfig,
    SchedulerConfig,
    ServerConfig,
    SlackConfig,
    SlackTarget,
    StoreConfig,
    TimeoutConfig,
    check_timezone,
)
from adapters.durations import format_duration
from adapters.suggest import did_you_mean

__all__ = [
    "ConfigError",
    "Duration",
    "ServerConfig",
    "SlackConfig",
    "GitHubConfig",
    "SchedulerConfig",
    "ScheduleConfig",
    "SlackTarget",
    "GitHubTarget",
    "LocalTarget",
    "PostTarget",
    "PersonConfig",
    "ReviewersConfig",
    "TimeoutConfig",
    "ReviewConfig",
    "CheckpointBlock",
    "LoopConfig",
    "BotConfig",
    "load_config",
    "validate_config",
    "substitute_env",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
]

#: Environment values shorter than this are not hidden in error messages (no secret is that short).
_MIN_SECRET = 4
#: Which reviewer keys name accounts of which channel.
_REVIEWER_KEYS = {
    "local": ("local",),
    "slack": ("slack_users", "slack_groups"),
    "github": ("github_users", "github_teams", "github_min_permission"),
}


class BotConfig(BaseModel):
    """The whole config file; build it with ``load_config``."""

    model_config = ConfigDict(extra="forbid")

    state_dir: Path = Path("./state")
    timezone: str = "UTC"
    server: ServerConfig = Field(default_factory=ServerConfig)
    slack: SlackConfig | None = None
    github: GitHubConfig | None = None
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    loops: list[LoopConfig] = Field(default_factory=list)
    people: list[PersonConfig] = Field(default_factory=list)
    store: StoreConfig | None = None  # None: SQLite in state_dir (loopbot.db)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return check_timezone(value)

    @model_validator(mode="after")
    def _people(self) -> BotConfig:
        """One name per person and one person per account, or "counted once" would be a guess."""
        names: set[str] = set()
        owner: dict[str, str] = {}
        for i, person in enumerate(self.people):
            if person.name.casefold() in names:
                raise ValueError(f"people[{i}].name: {person.name!r} is listed twice")
            names.add(person.name.casefold())
            for account in person.accounts():
                if account.casefold() in owner:
                    raise ValueError(
                        f"people[{i}]: {account} already belongs to {owner[account.casefold()]!r}; "
                        "an account is one person"
                    )
                owner[account.casefold()] = person.name
        for i, loop in enumerate(self.loops):
            named = (loop.review.reviewers.people if loop.review.reviewers else None) or []
            unknown = [name for name in named if name.casefold() not in names]
            if unknown:
                known = [p.name for p in self.people]
                raise ValueError(
                    f"loops[{i}].review.reviewers.people: {unknown[0]!r} is not in the top-level people: list"
                    f"{did_you_mean(unknown[0], known)}"
                )
        return self

    @model_validator(mode="after")
    def _across(self) -> BotConfig:
        seen: set[str] = set()
        for i, loop in enumerate(self.loops):
            if loop.name in seen:
                raise ValueError(f"loops[{i}].name: {loop.name!r} is used twice; loop names must be unique")
            seen.add(loop.name)
            targets = [(f"post_to[{j}]", t) for j, t in enumerate(loop.review.post_to)]
            targets += [(f"timeout.escalate_to[{j}]", t) for j, t in enumerate(loop.review.timeout.escalate_to)]
            for where, target in targets:
                for kind in ("slack", "github"):
                    if getattr(target, kind) is not None and getattr(self, kind) is None:
                        raise ValueError(
                            f"loops[{i}].review.{where}.{kind}: needs the top-level {kind}: block configured"
                        )
        return self

    def loop(self, name: str) -> LoopConfig | None:
        return next((loop for loop in self.loops if loop.name == name), None)

    def channels(self) -> list[str]:
        """The channels this bot posts to and takes answers from, with how answers arrive."""
        names = ["local"]
        if self.slack is not None:
            names.append("slack (Socket Mode)" if self.slack.app_token is not None else "slack (POST /slack/events)")
        if self.github is not None:
            ways = ["POST /github/webhook"] if self.github.webhook_secret is not None else []
            if self.github.poll_interval is not None:
                ways.append(f"polling every {format_duration(self.github.poll_interval)}")
            names.append(f"github ({', '.join(ways) or 'posting only: set webhook_secret or poll_interval'})")
        return names

    def review_warnings(self) -> list[str]:
        """What ``check`` and ``serve`` warn about reviews: N-of-M across channels with nobody mapped.

        Without a ``people:`` entry each account is its own person, so one
        person answering on Slack and on GitHub would count twice.
        """
        mapped = {account.split(":", 1)[0] for person in self.people for account in person.accounts()}
        warnings = []
        for loop in self.loops:
            review = loop.review
            who = review.reviewers
            if review.approvals_required < 2 or who is None:
                continue
            spans = [kind for kind, keys in _REVIEWER_KEYS.items() if any(getattr(who, key) for key in keys)]
            if len(spans) > 1 and not set(spans) <= mapped:
                warnings.append(
                    f"loop {loop.name}: approvals_required is {review.approvals_required} and reviewers span "
                    f"{', '.join(spans)}; without a people: entry one person voting on two channels counts twice"
                )
        return warnings

    def secret_values(self) -> Iterator[str]:
        """Every secret's plain value, for log redaction; never print these."""
        for block in (self.slack, self.github, self.store):
            if block is None:
                continue
            for value in block.__dict__.values():
                if isinstance(value, SecretStr) and value.get_secret_value():
                    yield value.get_secret_value()

    def redacted(self) -> dict[str, Any]:
        """The config as plain data with every secret shown as "***" (safe for logs and status)."""

        def clean(value: Any) -> Any:
            if isinstance(value, SecretStr):
                return "***"
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list):
                return [clean(v) for v in value]
            if isinstance(value, timedelta):
                return format_duration(value)
            if isinstance(value, Path):
                return str(value)
            return value

        return clean(self.model_dump(exclude_none=True))

    def summary(self) -> str:
        """A few readable lines for `loopbot check` and startup logs; no secrets."""
        lines = [
            f"state_dir: {self.state_dir}",
            f"server: {self.server.host}:{self.server.port}",
            f"channels: {', '.join(self.channels())}",
            f"loops: {len(self.loops)}",
        ]
        for loop in self.loops:
            source = f"pattern {loop.pattern}" if loop.pattern else f"factory {loop.factory}"
            if loop.schedule is None:
                when = "on request"
            elif loop.schedule.cron:
                when = f"cron '{loop.schedule.cron}' {loop.schedule.timezone or self.timezone}"
            else:
                assert loop.schedule.interval is not None
                when = f"every {format_duration(loop.schedule.interval)}"
            start = ", runs on start" if loop.run_on_start else ""
            block = loop.checkpoint
            # `preset: disabled` (or `enabled: false`; a field overrides the preset): it never pauses for review
            paused = block is None or (block.model_extra or {}).get("enabled", block.preset != "disabled")
            review = f"{loop.review.approvals_required} approval(s) needed" if paused else "checkpoints disabled"
            lines.append(f"  - {loop.name}: {source}; {when}{start}; {review}")
        return "\n".join(lines)


def _loc(parts: tuple[int | str, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at ``loc`` accepts, to suggest a fix for a typo."""
    model: Any = BotConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        model = next((a for a in _walk_types(annotation) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def _walk_types(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _walk_types(arg)


def _explain(error: Any) -> tuple[str, str]:
    """(key path, message) for one pydantic error, in the words a config author needs."""
    def shown(part: Any) -> bool:  # drop pydantic's union/validator labels from the key path
        return not (isinstance(part, str) and ("[" in part or part.startswith("function-")))

    loc = tuple(part for part in error["loc"] if shown(part))
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        message = f"unknown key{did_you_mean(str(loc[-1]), known)}; known keys here: {', '.join(known)}"
    elif kind == "missing":
        message = "required key is missing"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    # Validators on a whole block name a deeper key themselves ("loops[1].name: ...").
    if re.match(r"^(?:loops|people)\[\d+\]\S*: ", message):
        where, _, message = message.partition(": ")
        return where, message
    return _loc(loc) or "(top level)", message


def _hide(message: str, values: set[str]) -> str:
    """Blank out environment values an error message quotes (short ones cannot be secrets)."""
    for value in sorted(values, key=len, reverse=True):
        if len(value) >= _MIN_SECRET:
            message = message.replace(value, "***")
    return message


def _from_env_note(where: str, taken: Mapping[str, str], environ: Mapping[str, str]) -> str:
    var = taken.get(where)
    if var is None:
        return ""
    return f" (the value {environ[var]!r} comes from ${var}: fix ${var}, or set {where} in the file)"


#: The blocks whose unset variables ``need_secrets=False`` lets pass.
_SECRET_BLOCKS: dict[str, type[BaseModel]] = {"slack": SlackConfig, "github": GitHubConfig}


def _secret_stand_in(path: str, name: str, placeholders: dict[str, str]) -> str | None:
    """"" for an unset variable inside a slack:/github: block, None (an error) anywhere else."""
    if path.split(".", 1)[0] not in _SECRET_BLOCKS:
        return None
    placeholders[path] = name
    return ""


def _fill_placeholders(data: dict[str, Any], placeholders: Mapping[str, str]) -> None:
    """Give each key left empty by an unset secret a value its field accepts ("", else 0, else None).

    A command that never talks to Slack or GitHub must still load a config
    whose ``app_id: ${GITHUB_APP_ID}`` is unset in its shell.
    """
    for path in placeholders:
        block_name, _, key = path.partition(".")
        block = data.get(block_name)
        if not isinstance(block, dict) or "." in key or "[" in key or block.get(key) != "":
            continue
        field = _SECRET_BLOCKS[block_name].model_fields.get(key)
        if field is None or field.annotation is None:
            continue  # an unknown key: validation names it
        adapter: TypeAdapter[Any] = TypeAdapter(field.annotation)
        for candidate in ("", 0, None):
            try:
                adapter.validate_python(candidate)
            except ValidationError:
                continue
            block[key] = candidate
            break


def load_config(
    path: str | os.PathLike[str], environ: Mapping[str, str] | None = None, *, need_secrets: bool = True
) -> BotConfig:
    """Read, substitute and validate ``path``; relative ``state_dir`` is resolved against the file's folder.

    With ``need_secrets=False``, a variable used inside the ``slack:`` or
    ``github:`` block may be unset: the key loads as empty and its secret is
    absent. Everything else is checked as before.
    """
    env = os.environ if environ is None else environ
    placeholders: dict[str, str] = {}

    def stand_in(where: str, variable: str) -> str | None:
        return None if need_secrets else _secret_stand_in(where, variable, placeholders)

    read = read_config(path, env, unset=stand_in)
    _fill_placeholders(read.data, placeholders)
    return validate_config(read, path, env)


def validate_config(read: ConfigData, path: str | os.PathLike[str], environ: Mapping[str, str]) -> BotConfig:
    """The models' verdict on ``read`` (from ``read_config(path, environ)``): the config, or every problem."""
    name = str(path)
    try:
        config = BotConfig.model_validate(read.data)
    except ValidationError as err:
        lines = [
            f"{name}: {where}: {_hide(message, read.from_env)}{_from_env_note(where, read.taken, environ)}"
            for where, message in map(_explain, err.errors())
        ]
        raise ConfigError(lines) from None
    config.state_dir = resolve_state_dir(config.state_dir, path)
    return config
