"""The config file as plain data: read within limits, parsed as YAML, ``${ENV}`` substituted.

No pydantic here: ``bot.config`` validates this data with its models, and
``bot.config_memo`` reads it for `status` and `decide`, which start without
loading pydantic when the models have already judged the keys they read.
Both raise the same ``ConfigError`` for the file itself (missing, too
large, not YAML, an unset variable).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

__all__ = [
    "ConfigError",
    "ConfigData",
    "CHANNEL_BLOCKS",
    "channel_stand_in",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_NODES",
    "read_config",
    "resolve_state_dir",
    "substitute_env",
]

_ENV = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: server keys the file may leave to the environment (a platform sets $PORT, and $HOST for 0.0.0.0).
_SERVER_ENV = {"port": "PORT", "host": "HOST"}
#: A config is a few KiB; these stop a file that is not one (or a YAML alias
#: bomb: nine levels of aliases, 461 bytes, expand to 387 million strings)
#: before it costs minutes and gigabytes.
MAX_CONFIG_BYTES = 1024 * 1024
MAX_CONFIG_DEPTH = 50
MAX_CONFIG_NODES = 100_000
#: The top-level blocks of the channels' (and the pages') settings and secrets: only commands that use them need them.
CHANNEL_BLOCKS = ("slack", "github", "web")


class ConfigError(ValueError):
    """The config cannot be used; ``errors`` holds one "file: key.path: problem" line each."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


class ConfigData(NamedTuple):
    """The file's data, ready to validate, and what came from the environment (for error messages)."""

    data: dict[str, Any]
    from_env: set[str]  #: every environment value substituted: an error message hides them
    taken: dict[str, str]  #: server keys filled from the environment, e.g. {"server.port": "PORT"}


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


def channel_stand_in(path: str, name: str) -> str | None:
    """An ``unset`` for ``read_config``: "" for a variable inside a channel block, None (an error) elsewhere.

    A command that never talks to Slack or GitHub must load a config whose
    ``bot_token: ${SLACK_BOT_TOKEN}`` is unset in its shell.
    """
    return "" if path.split(".", 1)[0].split("[", 1)[0] in CHANNEL_BLOCKS else None


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


def read_config(
    path: str | os.PathLike[str],
    environ: Mapping[str, str],
    *,
    unset: Callable[[str, str], str | None] | None = None,
) -> ConfigData:
    """Read and parse ``path``, substitute ``environ`` (``unset``: see ``substitute_env``), fill server from it."""
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
    data, errors = substitute_env(raw, environ, used=from_env, unset=unset)
    if errors:
        raise ConfigError([f"{name}: {line}" for line in errors])
    return ConfigData(data, from_env, _server_from_env(data, environ))


def resolve_state_dir(state_dir: Path, path: str | os.PathLike[str]) -> Path:
    """A relative ``state_dir`` is relative to the config file's folder, not to where loopbot was started."""
    return state_dir if state_dir.is_absolute() else (Path(path).parent / state_dir).resolve()
