"""The bot's YAML config: read, substitute ``${ENV}``, validate, explain mistakes.

``load_config(path, environ)`` returns a ``BotConfig`` (pydantic v2, unknown
keys refused so typos surface) or raises ``ConfigError`` whose lines read
``config.yaml: loops[1].schedule.cron: <what is wrong>``. Secrets are
``SecretStr``: they never show in repr/str, ``redacted()`` or ``summary()``.
Keys are design.md's "Contracts" plus bot_contract.md.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml
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
    "substitute_env",
]

_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Environment values shorter than this are not hidden in error messages (no secret is that short).
_MIN_SECRET = 4
#: server keys the file may leave to the environment (a platform sets $PORT, and $HOST for 0.0.0.0).
_SERVER_ENV = {"port": "PORT", "host": "HOST"}
#: Which reviewer keys name accounts of which channel.
_REVIEWER_KEYS = {
    "local": ("local",),
    "slack": ("slack_users", "slack_groups"),
    "github": ("github_users", "github_teams", "github_min_permission"),
}


class ConfigError(ValueError):
    """The config cannot be used; ``errors`` holds one "file: key.path: problem" line each."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


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
    store: StoreConfig | None = None  # None: the directory store in state_dir

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


def substitute_env(
    value: Any,
    environ: Mapping[str, str],
    path: str = "",
    used: set[str] | None = None,
    *,
    unset: Callable[[str, str], str | None] | None = None,
) -> tuple[Any, list[str]]:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string (``$$`` is a literal ``$``).

    Works on parsed YAML so a substituted value can never change the
    document's structure; returns the new tree and "key.path: problem" lines.
    Values taken from the environment are added to ``used`` so error
    messages can hide them (any of them may be a secret). ``unset(path,
    name)`` may stand in for a variable that is not set (its text replaces
    it); when it returns None, or is not given, that is an error.
    """
    errors: list[str] = []
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            out[key], errs = substitute_env(item, environ, f"{path}.{key}" if path else str(key), used, unset=unset)
            errors += errs
        return out, errors
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            new, errs = substitute_env(item, environ, f"{path}[{i}]", used, unset=unset)
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
            if used is not None:
                used.add(environ[name])
            return environ[name]
        if default is not None:
            return default
        stand_in = unset(path, name) if unset is not None else None
        if stand_in is not None:
            return stand_in
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


class _RepeatedKey(yaml.YAMLError):
    def __init__(self, key: Any, first: int, again: int) -> None:
        super().__init__(f"line {again}: key {key!r} appears twice (first on line {first}); keep one")


class _TooDeep(yaml.YAMLError):
    def __init__(self, line: int) -> None:
        super().__init__(f"line {line}: nested more than {MAX_CONFIG_DEPTH} levels deep; a config is never that deep")


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a repeated key: plain YAML keeps the last one silently,
    so a second `schedule:` under a loop would quietly replace the first.

    It also stops at ``MAX_CONFIG_DEPTH`` levels, before the composer's
    recursion (and PyYAML's scanning ahead) gets expensive.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_CONFIG_DEPTH:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` may be overridden by explicit keys
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise _RepeatedKey(key, first_line[key], line)
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


def _server_from_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Fill ``server.port`` / ``server.host`` the file leaves out from $PORT / $HOST (a platform's way).

    Returns {"server.port": "PORT", ...} for the values taken, so an error can
    name the variable rather than a key the file does not have.
    """
    server = data.get("server")
    if server is not None and not isinstance(server, dict):
        return {}  # validation reports the wrong shape
    server = data["server"] = dict(server or {})
    taken = {}
    for key, var in _SERVER_ENV.items():
        if key not in server and environ.get(var):
            server[key] = environ[var]
            taken[f"server.{key}"] = var
    server.setdefault("port", 8000)
    return taken


def _from_env_note(where: str, taken: Mapping[str, str], environ: Mapping[str, str]) -> str:
    var = taken.get(where)
    if var is None:
        return ""
    return f" (the value {environ[var]!r} comes from ${var}: fix ${var}, or set {where} in the file)"


#: A config is a few KiB; these stop a file that is not one (or a YAML alias
#: bomb: nine levels of aliases, 461 bytes, expand to 387 million strings)
#: before it costs minutes and gigabytes.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_CONFIG_DEPTH = 50
MAX_CONFIG_NODES = 100_000
#: The blocks whose unset variables ``need_secrets=False`` lets pass.
_SECRET_BLOCKS: dict[str, type[BaseModel]] = {"slack": SlackConfig, "github": GitHubConfig}


def _read_text(path: str | os.PathLike[str], name: str) -> str:
    """The file's text, reading at most one byte past the limit (``--config /dev/zero`` ends too)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(
            [f"{name}: file not found; `loopbot init {shlex.quote(name)}` writes the commented example "
             "(config.example.yaml) there, or pass --config PATH"]
        ) from None
    except IsADirectoryError:
        raise ConfigError([f"{name}: is a directory; pass the config file with --config PATH"]) from None
    except OSError as err:
        raise ConfigError([f"{name}: cannot read it ({err.strerror})"]) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError([f"{name}: larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB; is it the config file?"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ConfigError([f"{name}: line {line}: not UTF-8 text ({err.reason}); save the file as UTF-8"]) from None


def _check_size(raw: Any, name: str) -> None:
    """ConfigError when the parsed tree, with every alias expanded, is larger or deeper than a config.

    Aliases share one object, so the parse is cheap; every walk after it
    (substitution, validation) expands them. Walked without recursion,
    visiting each alias as often as the later walks would, and stopping at
    the limit - so the check costs at most ``MAX_CONFIG_NODES`` steps.
    """
    stack: list[tuple[Any, int]] = [(raw, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > MAX_CONFIG_NODES:
            raise ConfigError([
                f"{name}: more than {MAX_CONFIG_NODES:,} values once YAML aliases (*name) are expanded; "
                "a config is far smaller - is an alias repeated many times?"
            ])
        if isinstance(value, dict | list):
            if depth >= MAX_CONFIG_DEPTH:
                raise ConfigError([f"{name}: nested more than {MAX_CONFIG_DEPTH} levels deep"])
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


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

    With ``need_secrets=False`` (commands that never talk to a channel:
    ``status``, ``decide``), a variable used inside the ``slack:`` or
    ``github:`` block may be unset: the key loads as empty and its secret is
    absent. Everything else is checked as before.
    """
    env = os.environ if environ is None else environ
    name = str(path)
    text = _read_text(path, name)
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except (_RepeatedKey, _TooDeep) as err:
        raise ConfigError([f"{name}: {err}"]) from None
    except RecursionError:  # a flow of brackets deeper than the composer's stack, before our depth check saw it
        raise ConfigError([f"{name}: nested more than {MAX_CONFIG_DEPTH} levels deep"]) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        raise ConfigError([f"{name}: {where}: not valid YAML ({getattr(err, 'problem', None) or err})"]) from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError([f"{name}: (top level): expected a mapping of keys (state_dir, server, loops, ...)"])
    _check_size(raw, name)
    from_env: set[str] = set()
    placeholders: dict[str, str] = {}

    def stand_in(where: str, variable: str) -> str | None:
        return None if need_secrets else _secret_stand_in(where, variable, placeholders)

    data, errors = substitute_env(raw, env, used=from_env, unset=stand_in)
    if errors:
        raise ConfigError([f"{name}: {line}" for line in errors])
    _fill_placeholders(data, placeholders)
    taken = _server_from_env(data, env)
    try:
        config = BotConfig.model_validate(data)
    except ValidationError as err:
        lines = [
            f"{name}: {where}: {_hide(message, from_env)}{_from_env_note(where, taken, env)}"
            for where, message in map(_explain, err.errors())
        ]
        raise ConfigError(lines) from None
    if not config.state_dir.is_absolute():
        config.state_dir = (Path(path).parent / config.state_dir).resolve()
    return config
