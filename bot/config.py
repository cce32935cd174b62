"""The bot's config as pydantic models: validate what ``bot.config_file`` read, explain mistakes.

``load_config(path, environ)`` reads the file (``bot.config_file``: YAML,
``${ENV}``) and returns a ``BotConfig`` (pydantic v2, unknown keys refused so
typos surface) or raises ``ConfigError`` whose lines read
``config.yaml: loops[1].schedule.cron: <what is wrong>``. Secrets are
``SecretStr``: they never show in repr/str, ``redacted()`` or ``summary()``.
``CoreConfig``, the keys every command reads, is ``BotConfig``'s base and
all that `status` and `decide` validate (``validate_core``, through
``bot.config_memo``): each key is declared once, in one of the two.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Self, TypeVar

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
    CHANNEL_BLOCKS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_NODES,
    ConfigData,
    ConfigError,
    channel_stand_in,
    read_config,
    resolve_state_dir,
    substitute_env,
)
from .config_errors import error_lines, walk_types
from .config_blocks import (
    CheckpointBlock,
    Duration,
    GitHubConfig,
    GitHubTarget,
    LocalTarget,
    LoggingConfig,
    LoopBlock,
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
    WebConfig,
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
    "LoopBlock",
    "CoreConfig",
    "BotConfig",
    "load_config",
    "validate_config",
    "validate_core",
    "channel_secret_keys",
    "substitute_env",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
]

#: Which reviewer keys name accounts of which channel.
_REVIEWER_KEYS = {
    "local": ("local",),
    "slack": ("slack_users", "slack_groups"),
    "github": ("github_users", "github_teams", "github_min_permission"),
}


class CoreConfig(BaseModel):
    """The config without its channel blocks: all that a command which never talks to Slack or GitHub checks.

    `status` and `decide` validate this (``validate_core``, through
    ``bot.config_memo``), so a ``slack:`` or ``github:`` block - or its unset
    secret - cannot stop them; ``BotConfig`` adds those blocks, refuses
    unknown keys (here they are ignored) and checks what spans the channels.
    Built when first validated (``defer_build``), as the blocks are.
    """

    model_config = ConfigDict(extra="ignore", defer_build=True)

    state_dir: Path = Path("./state")
    timezone: str = "UTC"
    server: ServerConfig = Field(default_factory=ServerConfig)
    # The channel blocks, not judged here: BotConfig gives them their models. Held in their place so that
    # BotConfig's keys keep the file's order (pydantic orders a subclass's fields after its base's).
    slack: Any = None
    github: Any = None
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    loops: list[LoopBlock] = Field(default_factory=list)
    people: list[PersonConfig] = Field(default_factory=list)
    store: StoreConfig | None = None  # None: SQLite in state_dir (loopbot.db)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    web: Any = None  # the pages' block (secrets, like a channel's): BotConfig gives it its model

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return check_timezone(value)

    @model_validator(mode="after")
    def _people(self) -> Self:
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
            for key, who in (("review.reviewers", loop.review.reviewers), ("operators", loop.operators)):
                unknown = [name for name in (who.people if who else None) or [] if name.casefold() not in names]
                if unknown:
                    known = [p.name for p in self.people]
                    raise ValueError(
                        f"loops[{i}].{key}.people: {unknown[0]!r} is not in the top-level people: list"
                        f"{did_you_mean(unknown[0], known)}"
                    )
        return self

    @model_validator(mode="after")
    def _loop_names(self) -> Self:
        seen: set[str] = set()
        for i, loop in enumerate(self.loops):
            if loop.name in seen:
                raise ValueError(f"loops[{i}].name: {loop.name!r} is used twice; loop names must be unique")
            seen.add(loop.name)
        return self

    def _secret_blocks(self) -> tuple[BaseModel | None, ...]:
        return (self.store,)

    def secret_values(self) -> Iterator[str]:
        """Every secret's plain value, for log redaction; never print these."""
        for block in self._secret_blocks():
            if block is None:
                continue
            for value in block.__dict__.values():
                if isinstance(value, SecretStr) and value.get_secret_value():
                    yield value.get_secret_value()


class BotConfig(CoreConfig):
    """The whole config file; build it with ``load_config``."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    slack: SlackConfig | None = None
    github: GitHubConfig | None = None
    web: WebConfig = Field(default_factory=WebConfig)

    @model_validator(mode="after")
    def _channel_targets(self) -> BotConfig:
        """A review posted or escalated to a channel needs that channel's top-level block."""
        for i, loop in enumerate(self.loops):
            targets = [(f"post_to[{j}]", t) for j, t in enumerate(loop.review.post_to)]
            targets += [(f"timeout.escalate_to[{j}]", t) for j, t in enumerate(loop.review.timeout.escalate_to)]
            for where, target in targets:
                for kind in ("slack", "github"):
                    if getattr(target, kind) is not None and getattr(self, kind) is None:
                        raise ValueError(
                            f"loops[{i}].review.{where}.{kind}: needs the top-level {kind}: block configured"
                        )
        return self

    def _secret_blocks(self) -> tuple[BaseModel | None, ...]:
        return (self.slack, self.github, self.store, self.web)

    def loop(self, name: str) -> LoopBlock | None:
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


#: The blocks whose unset variables ``need_secrets=False`` lets pass (``bot.config_file.CHANNEL_BLOCKS``).
_SECRET_BLOCKS: dict[str, type[BaseModel]] = {"slack": SlackConfig, "github": GitHubConfig, "web": WebConfig}
#: Stand-ins other than the first value a key's type accepts: an empty webhook secret is an error, an unset one
#: (for a command that needs no secrets) stands for none - no webhook.
_STAND_INS: dict[str, Any] = {"github.webhook_secret": None, "web.secret": None, "web.token": None}
assert tuple(_SECRET_BLOCKS) == CHANNEL_BLOCKS


def _secret_stand_in(path: str, name: str, placeholders: dict[str, str]) -> str | None:
    """"" for an unset variable inside a slack:/github: block, None (an error) anywhere else."""
    stand_in = channel_stand_in(path, name)
    if stand_in is not None:
        placeholders[path] = name
    return stand_in


def channel_secret_keys() -> dict[str, list[str]]:
    """The keys of each channel block that hold a secret (``SecretStr`` in its model), for redaction."""
    return {
        block: [key for key, field in model.model_fields.items() if SecretStr in walk_types(field.annotation)]
        for block, model in _SECRET_BLOCKS.items()
    }


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
        if path in _STAND_INS:
            block[key] = _STAND_INS[path]
            continue
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
    config = _validated(BotConfig, read, path, environ)
    config.state_dir = resolve_state_dir(config.state_dir, path)
    return config


def validate_core(read: ConfigData, path: str | os.PathLike[str], environ: Mapping[str, str]) -> CoreConfig:
    """``CoreConfig``'s verdict on ``read``: the keys every command reads, or their problems (state_dir as written)."""
    return _validated(CoreConfig, read, path, environ)


_Model = TypeVar("_Model", bound=CoreConfig)


def _validated(
    model: type[_Model], read: ConfigData, path: str | os.PathLike[str], environ: Mapping[str, str]
) -> _Model:
    name = str(path)
    try:
        return model.model_validate(read.data)
    except ValidationError as err:
        raise ConfigError(error_lines(model, err, read, environ, name)) from None
