"""The bot's YAML config: read, substitute ``${ENV}``, validate, explain mistakes.

``load_config(path, environ)`` returns a ``BotConfig`` (pydantic v2, unknown
keys refused so typos surface) or raises ``ConfigError`` whose lines read
``config.yaml: loops[1].schedule.cron: <what is wrong>``. Secrets are
``SecretStr``: they never show in repr/str, ``redacted()`` or ``summary()``.
Keys are design.md's "Contracts" plus bot_contract.md.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from loop_engine.checkpoint import CheckpointConfig, CheckpointPresets
from loop_engine.errors import ConfigurationError

from .durations import format_duration, parse_duration
from .reviews import Reviewers, ReviewPolicy

__all__ = [
    "ConfigError",
    "Duration",
    "ServerConfig",
    "SlackConfig",
    "GitHubConfig",
    "SchedulerConfig",
    "ScheduleConfig",
    "PostTarget",
    "ReviewersConfig",
    "TimeoutConfig",
    "ReviewConfig",
    "CheckpointBlock",
    "LoopConfig",
    "BotConfig",
    "load_config",
    "substitute_env",
]

_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_FACTORY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
PRESETS = ("manual_only", "conservative", "production", "disabled")


class ConfigError(ValueError):
    """The config cannot be used; ``errors`` holds one "file: key.path: problem" line each."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


def _duration(value: Any) -> Any:
    """Durations are "30m"-style strings or plain seconds."""
    if isinstance(value, str):
        return parse_duration(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"duration must be longer than zero, got {value}")
        return timedelta(seconds=value)
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration)]


def _zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown timezone {name!r}; use an IANA name like UTC or Europe/Berlin") from err
    return name


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class ServerConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)


class SlackConfig(_Model):
    bot_token: SecretStr
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    api_base_url: str = "https://slack.com/api/"
    command: str = "/loopbot"

    @model_validator(mode="after")
    def _mode(self) -> SlackConfig:
        if self.app_token is None and self.signing_secret is None:
            raise ValueError("set signing_secret (HTTP events) or app_token (Socket Mode)")
        return self


class GitHubConfig(_Model):
    token: SecretStr | None = None
    app_id: int | None = None
    private_key: SecretStr | None = None
    installation_id: int | None = None
    webhook_secret: SecretStr | None = None
    base_url: str = "https://api.github.com"
    poll_interval: Duration | None = None

    @model_validator(mode="after")
    def _auth(self) -> GitHubConfig:
        app = [self.app_id, self.private_key, self.installation_id]
        if self.token is not None and any(v is not None for v in app):
            raise ValueError("give either token or app_id + private_key + installation_id, not both")
        if self.token is None and not all(v is not None for v in app):
            raise ValueError("set token, or all of app_id, private_key and installation_id")
        return self


class SchedulerConfig(_Model):
    misfire_grace_time: int | None = Field(3600, ge=1)
    poll_interval: float = Field(0.5, gt=0)


class ScheduleConfig(_Model):
    """``{cron, timezone}`` or ``{interval}``; numeric crontab weekdays are stored as names."""

    cron: str | None = None
    timezone: str | None = None
    interval: Duration | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # Imported here: bot.scheduler pulls in SQLAlchemy, which no other command needs.
        from .scheduler import crontab_to_apscheduler

        try:
            expression = crontab_to_apscheduler(value.strip())
            CronTrigger.from_crontab(expression, timezone=ZoneInfo("UTC"))
        except ValueError as err:
            raise ValueError(f"invalid cron expression {value!r}: {err}") from err
        return expression

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else _zone(value)

    @model_validator(mode="before")
    @classmethod
    def _one(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if ("cron" in data) == ("interval" in data):
                raise ValueError("give exactly one of cron (with optional timezone) or interval")
            if "interval" in data and "timezone" in data:
                raise ValueError("timezone applies to cron schedules only; remove it or use cron")
        return data


class SlackTarget(_Model):
    channel: str


class GitHubTarget(_Model):
    repository: str = Field(pattern=r"^[\w.-]+/[\w.-]+$")
    issue: int | None = Field(None, ge=1)


class PostTarget(_Model):
    """One place a review goes: ``{slack: {channel}}`` or ``{github: {repository, issue}}``."""

    slack: SlackTarget | None = None
    github: GitHubTarget | None = None

    @model_validator(mode="after")
    def _one(self) -> PostTarget:
        if (self.slack is None) == (self.github is None):
            raise ValueError("each target is exactly one of {slack: {channel: ...}} or {github: {repository: ...}}")
        return self


class ReviewersConfig(_Model):
    slack_users: list[str] | None = None
    slack_groups: list[str] | None = None
    github_users: list[str] | None = None
    github_teams: list[str] | None = None
    github_min_permission: Literal["read", "triage", "write", "maintain", "admin"] | None = None
    local: list[str] | None = None


class TimeoutConfig(_Model):
    remind_after: Duration | None = None
    escalate_after: Duration | None = None
    escalate_to: list[PostTarget] = Field(default_factory=list)
    decide_after: Duration | None = None
    default: Literal["reject", "pause", "approve"] = "reject"
    allow_default_approve: bool = False

    @model_validator(mode="after")
    def _rules(self) -> TimeoutConfig:
        if self.default == "approve" and not self.allow_default_approve:
            raise ValueError(
                "default: approve lets a run go ahead with nobody deciding; "
                "add allow_default_approve: true if that is really wanted, or use reject or pause"
            )
        if self.escalate_after is not None and not self.escalate_to:
            raise ValueError("escalate_after needs escalate_to: the targets to escalate to")
        return self


class ReviewConfig(_Model):
    post_to: list[PostTarget] = Field(default_factory=list)
    reviewers: ReviewersConfig | None = None
    approvals_required: int = Field(1, ge=1)
    timeout: TimeoutConfig = Field(default_factory=TimeoutConfig)

    def to_policy(self) -> ReviewPolicy:
        """The pure-logic policy a Review carries (bot.reviews)."""
        who = self.reviewers.model_dump() if self.reviewers else {}
        t = self.timeout
        return ReviewPolicy(
            reviewers=Reviewers(**who),
            approvals_required=self.approvals_required,
            remind_after=t.remind_after,
            escalate_after=t.escalate_after,
            escalate_to=[target.model_dump(exclude_none=True) for target in t.escalate_to],
            decide_after=t.decide_after,
            default=t.default,
            allow_default_approve=t.allow_default_approve,
        )


class CheckpointBlock(BaseModel):
    """``{preset: production}`` and/or ``CheckpointConfig`` fields (fields override the preset)."""

    model_config = ConfigDict(extra="allow")
    preset: Literal["manual_only", "conservative", "production", "disabled"] | None = None

    @model_validator(mode="after")
    def _fields(self) -> CheckpointBlock:
        self.to_checkpoint_config()
        return self

    def to_checkpoint_config(self) -> CheckpointConfig:
        fields = dict(self.model_extra or {})
        known = [name for name in CheckpointConfig.__dataclass_fields__]
        unknown = [key for key in fields if key not in known]
        if unknown:
            hints = [f"{key!r}" + _did_you_mean(key, known) for key in unknown]
            raise ValueError(f"unknown checkpoint key(s) {', '.join(hints)}; known: preset, {', '.join(known)}")
        base = getattr(CheckpointPresets, self.preset)() if self.preset else CheckpointConfig()
        try:
            return CheckpointConfig(**{**base.__dict__, **fields})
        except ConfigurationError as err:
            raise ValueError(str(err)) from err


class LoopConfig(_Model):
    name: str
    pattern: str | None = None
    factory: str | None = None
    schedule: ScheduleConfig | None = None
    run_on_start: bool = False
    overlap: Literal["skip", "allow"] = "skip"
    options: dict[str, Any] = Field(default_factory=dict)
    checkpoint: CheckpointBlock | None = None
    review: ReviewConfig = Field(default_factory=ReviewConfig)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _SLUG.match(value):
            raise ValueError(f"{value!r} is not a loop name: use lower-case letters, digits, - and _ (e.g. daily-triage)")
        return value

    @field_validator("factory")
    @classmethod
    def _factory(cls, value: str | None) -> str | None:
        if value is not None and not _FACTORY.match(value):
            raise ValueError(f"factory {value!r} must look like package.module:callable")
        return value

    @model_validator(mode="before")
    @classmethod
    def _source(cls, data: Any) -> Any:
        if isinstance(data, dict) and (data.get("pattern") is None) == (data.get("factory") is None):
            raise ValueError("give exactly one of pattern (a built-in, e.g. demo) or factory (module:callable)")
        return data


class BotConfig(_Model):
    state_dir: Path = Path("./state")
    timezone: str = "UTC"
    server: ServerConfig = Field(default_factory=ServerConfig)
    slack: SlackConfig | None = None
    github: GitHubConfig | None = None
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    loops: list[LoopConfig] = Field(default_factory=list)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return _zone(value)

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
                        raise ValueError(f"loops[{i}].review.{where}.{kind}: needs the top-level {kind}: block configured")
        return self

    def loop(self, name: str) -> LoopConfig | None:
        return next((loop for loop in self.loops if loop.name == name), None)

    def secret_values(self) -> Iterator[str]:
        """Every secret's plain value, for log redaction; never print these."""
        for block in (self.slack, self.github):
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
        channels = ["local"] + [name for name in ("slack", "github") if getattr(self, name) is not None]
        lines = [
            f"state_dir: {self.state_dir}",
            f"server: {self.server.host}:{self.server.port}",
            f"channels: {', '.join(channels)}",
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
            review = loop.review
            lines.append(f"  - {loop.name}: {source}; {when}{start}; {review.approvals_required} approval(s) needed")
        return "\n".join(lines)


def _did_you_mean(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def substitute_env(value: Any, environ: Mapping[str, str], path: str = "") -> tuple[Any, list[str]]:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string (``$$`` is a literal ``$``).

    Works on parsed YAML so a substituted value can never change the
    document's structure; returns the new tree and "key.path: problem" lines.
    """
    errors: list[str] = []
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[key], errs = substitute_env(item, environ, f"{path}.{key}" if path else str(key))
            errors += errs
        return out, errors
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            new, errs = substitute_env(item, environ, f"{path}[{i}]")
            items.append(new)
            errors += errs
        return items, errors
    if not isinstance(value, str):
        return value, errors

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        errors.append(f"{path}: environment variable {name} is not set; set it or write ${{{name}:-default}}")
        return ""

    return _ENV.sub(replace, value), errors


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
    loc = tuple(part for part in error["loc"] if not (isinstance(part, str) and ("[" in part or part.startswith("function-"))))
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(loc[:-1])
        message = f"unknown key{_did_you_mean(str(loc[-1]), known)}; known keys here: {', '.join(known)}"
    elif kind == "missing":
        message = "required key is missing"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    # Validators on a whole block name a deeper key themselves ("loops[1].name: ...").
    if re.match(r"^loops\[\d+\]\S*: ", message):
        where, _, message = message.partition(": ")
        return where, message
    return _loc(loc) or "(top level)", message


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> BotConfig:
    """Read, substitute and validate ``path``; relative ``state_dir`` is resolved against the file's folder."""
    env = os.environ if environ is None else environ
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([f"{name}: file not found; copy config.example.yaml to config.yaml or pass --config PATH"]) from None
    except OSError as err:
        raise ConfigError([f"{name}: cannot read it ({err.strerror})"]) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise ConfigError([f"{name}: {where}: not valid YAML ({getattr(err, 'problem', None) or err})"]) from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError([f"{name}: (top level): expected a mapping of keys (state_dir, server, loops, ...)"])
    data, errors = substitute_env(raw, env)
    if errors:
        raise ConfigError([f"{name}: {line}" for line in errors])
    server = data.get("server")
    if server is None or isinstance(server, dict):
        server = dict(server or {})
        server.setdefault("port", env.get("PORT", 8000))
        data["server"] = server
    try:
        config = BotConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError([f"{name}: {where}: {message}" for where, message in map(_explain, err.errors())]) from None
    if not config.state_dir.is_absolute():
        config.state_dir = (Path(path).parent / config.state_dir).resolve()
    return config
