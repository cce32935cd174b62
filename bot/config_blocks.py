"""The blocks of the config file below the top level, as pydantic models.

Each model refuses unknown keys (``extra="forbid"``) and checks what one
block can check by itself, a value by the rules of ``bot.config_rules``;
``bot.config`` assembles them into ``BotConfig``, checks what spans blocks
and turns errors into "file: key.path: problem".
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, field_validator, model_validator

from .config_rules import (
    WEB_BASE_URL,
    WEB_LINK_TTL,
    check_base_url,
    check_cron,
    check_factory,
    check_loop_name,
    check_timezone,
    checkpoint_config,
    check_web_secret,
    duration,
)
from .review_records import ReviewPolicy, Reviewers

if TYPE_CHECKING:  # pragma: no cover
    from loop_engine.checkpoint import CheckpointConfig

__all__ = [
    "Duration",
    "ServerConfig",
    "SlackConfig",
    "GitHubConfig",
    "SchedulerConfig",
    "StoreConfig",
    "LoggingConfig",
    "WebConfig",
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
    "check_timezone",
]

Duration = Annotated[timedelta, BeforeValidator(duration)]


class _Model(BaseModel):
    # defer_build: a block's validator is built when a model using it is first validated, not at import;
    # status and decide build CoreConfig's, without the channel blocks (bot.config_memo); serve all of them.
    model_config = ConfigDict(extra="forbid", defer_build=True)


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

    @field_validator("webhook_secret")
    @classmethod
    def _webhook_secret(cls, value: SecretStr | None) -> SecretStr | None:
        """Set means a webhook is served, and a webhook with no secret would take anyone's votes: refuse it."""
        if value is not None and not any(part.strip() for part in value.get_secret_value().split(",")):
            raise ValueError("is empty: set a secret (\"new,old\" while rotating), or leave the key out "
                             "to take no webhooks")
        return value

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


class LoggingConfig(_Model):
    """``logging: {format: json}``: one JSON object per line for a log store; ``text`` (the default) for people."""

    format: Literal["text", "json"] = "text"


class StoreConfig(_Model):
    """``store: {url: postgresql://...}``: the PostgreSQL store (several replicas on one database).

    ``url`` is a libpq URL (``postgresql://`` or ``postgres://``, ``${DATABASE_URL}``
    works); ``schema`` is the PostgreSQL schema the bot's tables live in, so
    several bots can share one database. Without a ``store`` block SQLite in
    ``state_dir`` (``loopbot.db``) is used. ``lease_seconds``: how long work
    handed to a replica stays its own without it asking again (a dead
    replica's work is taken over after that); ``election_interval``: how often
    each replica competes for leadership and beats (a dead leader is replaced
    within about that).
    """

    url: SecretStr
    schema_name: str = Field("loopbot", alias="schema", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    lease_seconds: float = Field(60.0, gt=0, le=86400)
    election_interval: float = Field(2.0, gt=0, le=60)

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    @field_validator("url")
    @classmethod
    def _url(cls, value: SecretStr) -> SecretStr:
        url = value.get_secret_value().strip()
        if not re.match(r"^postgres(ql)?://", url):
            shown = url.split("://", 1)[0] + "://..." if "://" in url else "a value without a scheme"
            raise ValueError(f"expected a postgresql://user:password@host:port/database URL, got {shown}")
        return SecretStr(url)


class WebConfig(_Model):
    """The read-only pages and /metrics (``bot.web``): on only when ``secret`` is set.

    ``secret`` signs the review links the Slack and GitHub messages carry
    (they expire after ``link_ttl``); ``token`` opens the dashboard, the run
    pages and /metrics (a bearer token, or a browser's basic auth password);
    ``base_url`` is the public address the links name, e.g. the reverse proxy's.
    Both secrets belong in the environment (``${LOOPBOT_WEB_SECRET}``).
    """

    secret: SecretStr | None = None
    token: SecretStr | None = None
    base_url: str = WEB_BASE_URL
    link_ttl: Duration = WEB_LINK_TTL

    @field_validator("secret", "token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return None if value is None else SecretStr(check_web_secret(value.get_secret_value()))

    @field_validator("base_url")
    @classmethod
    def _address(cls, value: str) -> str:
        return check_base_url(value)


class ScheduleConfig(_Model):
    """``{cron, timezone}`` or ``{interval}``; numeric crontab weekdays are stored as names."""

    cron: str | None = None
    timezone: str | None = None
    interval: Duration | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str | None) -> str | None:
        return None if value is None else check_timezone(value)

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


class LocalTarget(_Model):
    """The local channel takes no settings: its markdown files live under ``state_dir``."""


class PostTarget(_Model):
    """One place a review goes: ``{slack: {channel}}``, ``{github: {repository, issue}}`` or ``{local: {}}``.

    ``local`` lets a bot without Slack or GitHub escalate (a log warning and
    an escalation section in the review's markdown file); the local channel
    gets every review anyway.
    """

    slack: SlackTarget | None = None
    github: GitHubTarget | None = None
    local: LocalTarget | None = None

    @model_validator(mode="after")
    def _one(self) -> PostTarget:
        if sum(target is not None for target in (self.slack, self.github, self.local)) != 1:
            raise ValueError(
                "each target is exactly one of {slack: {channel: ...}}, {github: {repository: ...}} or {local: {}}"
            )
        return self


class PersonConfig(_Model):
    """One person's accounts, so N-of-M counts people: ``{name: alice, local: alice, slack: U0AAA, github: alice}``."""

    name: str = Field(min_length=1)
    local: str | None = None
    slack: str | None = None
    github: str | None = None

    def accounts(self) -> list[str]:
        """The channel-qualified ids ("slack:U0AAA") this person votes as."""
        return [f"{kind}:{value}" for kind in ("local", "slack", "github") if (value := getattr(self, kind))]


class ReviewersConfig(_Model):
    people: list[str] | None = None
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
        return checkpoint_config(self.preset, dict(self.model_extra or {}))


class LoopBlock(_Model):
    """One entry under ``loops:``; the engine's own settings (``loop_engine.config.LoopConfig``) are its factory's."""

    name: str
    pattern: str | None = None
    factory: str | None = None
    schedule: ScheduleConfig | None = None
    run_on_start: bool = False
    overlap: Literal["skip", "allow"] = "skip"
    options: dict[str, Any] = Field(default_factory=dict)
    checkpoint: CheckpointBlock | None = None
    review: ReviewConfig = Field(default_factory=ReviewConfig)
    #: Who may start and cancel its runs from chat and the CLI; unset: its reviewers.
    operators: ReviewersConfig | None = None

    def operator_policy(self) -> Reviewers:
        """``operators:`` as a ``Reviewers`` (checked by the same membership rules), else the reviewers."""
        who = self.operators if self.operators is not None else self.review.reviewers
        return Reviewers(**(who.model_dump() if who else {}))

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_loop_name(value)

    @field_validator("factory")
    @classmethod
    def _factory(cls, value: str | None) -> str | None:
        return None if value is None else check_factory(value)

    @model_validator(mode="before")
    @classmethod
    def _source(cls, data: Any) -> Any:
        if isinstance(data, dict) and (data.get("pattern") is None) == (data.get("factory") is None):
            raise ValueError("give exactly one of pattern (a built-in, e.g. demo) or factory (module:callable)")
        return data
