"""Pydantic's validation errors in the words a config author needs: "file: key.path: what is wrong".

A line names the key as the file spells it, suggests the key a typo meant,
hides every value that came from the environment (any may be a secret) and
says when a server key came from $PORT or $HOST rather than the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from .config_file import ConfigData
from adapters.suggest import did_you_mean

__all__ = ["error_lines", "walk_types"]

#: Environment values shorter than this are not hidden in error messages (no secret is that short).
_MIN_SECRET = 4


def error_lines(
    top: type[BaseModel], err: ValidationError, read: ConfigData, environ: Mapping[str, str], name: str
) -> list[str]:
    """One line per error of validating ``read`` (of file ``name``) with the model ``top``."""
    return [
        f"{name}: {where}: {_hide(message, read.from_env)}{_from_env_note(where, read.taken, environ)}"
        for where, message in (_explain(top, error) for error in err.errors())
    ]


def _loc(parts: tuple[int | str, ...]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _known_keys(top: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys the model at ``loc`` accepts, to suggest a fix for a typo."""
    model: Any = top
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        model = next((a for a in walk_types(annotation) if isinstance(a, type) and issubclass(a, BaseModel)), None)
        if model is None:
            return []
    return list(getattr(model, "model_fields", {}))


def walk_types(annotation: Any) -> Iterator[Any]:
    """``annotation`` and every type inside it (``SecretStr | None``: the union, SecretStr, NoneType)."""
    yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from walk_types(arg)


def _explain(top: type[BaseModel], error: Any) -> tuple[str, str]:
    """(key path, message) for one pydantic error, in the words a config author needs."""
    def shown(part: Any) -> bool:  # drop pydantic's union/validator labels from the key path
        return not (isinstance(part, str) and ("[" in part or part.startswith("function-")))

    loc = tuple(part for part in error["loc"] if shown(part))
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        known = _known_keys(top, loc[:-1])
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
