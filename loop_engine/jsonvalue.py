"""JSON values, checked: what may be stored, and where it failed if it may not.

Step outputs, observation contents, metadata and review contexts are typed
``Any`` because components put whatever they like there. Stored state must
come back *equal*, so anything that JSON would silently change (a tuple that
returns as a list, an int key that returns as a str, NaN that is not equal to
itself) or cannot hold at all (an object) is refused at save time with the
place it was found - never turned into ``str()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from .errors import PersistenceError

__all__ = [
    "NotJSONSerialisableError",
    "json_copy",
    "encode_datetime",
    "decode_datetime",
    "decode_enum",
]

E = TypeVar("E", bound=Enum)


class NotJSONSerialisableError(PersistenceError, TypeError):
    """A value that must be stored is not a JSON value; the message says where."""


def json_copy(value: Any, where: str) -> Any:
    """A deep copy of ``value`` if it is a JSON value, else an error naming ``where``.

    Copying while checking costs one walk either way, and keeps the stored
    document from sharing mutable containers with a live state.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            raise NotJSONSerialisableError(f"{where}: {value!r} is not a JSON number; store it as a string or None")
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotJSONSerialisableError(
                    f"{where}: key {key!r} of type {type(key).__name__} would come back as a string; use str keys"
                )
            out[key] = json_copy(item, f"{where}[{key!r}]")
        return out
    if kind is list:
        return [json_copy(item, f"{where}[{index}]") for index, item in enumerate(value)]
    return _json_copy_subclass(value, where)


def _json_copy_subclass(value: Any, where: str) -> Any:
    """The slow path: subclasses of JSON types (str enums, OrderedDict) and refusals."""
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return json_copy(float(value), where)
    if isinstance(value, Mapping):
        return json_copy(dict(value), where)
    if isinstance(value, list):
        return json_copy(list(value), where)
    hint = "; use a list" if isinstance(value, (tuple, set, frozenset)) else ""
    raise NotJSONSerialisableError(
        f"{where}: object of type {type(value).__name__} is not JSON-serialisable{hint} "
        "(store dicts, lists, strings, numbers, booleans or None)"
    )


def encode_datetime(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def decode_datetime(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected an ISO-8601 timestamp, got {type(value).__name__}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not an ISO-8601 timestamp") from None


def decode_enum(enum_type: type[E], name: Any, where: str) -> E:
    """Enums are stored by member name, which stays stable when values change."""
    try:
        return enum_type[name]
    except (KeyError, TypeError):
        choices = ", ".join(member.name for member in enum_type)
        raise ValueError(f"{where}: {name!r} is not a {enum_type.__name__} (one of {choices})") from None
