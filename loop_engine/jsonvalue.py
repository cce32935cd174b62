"""JSON values, checked: what may be stored, and where it failed if it may not.

Step outputs, observation contents, metadata and review contexts are typed
``Any`` because components put whatever they like there. Stored state must
come back *equal*, so anything that JSON would silently change (a tuple that
returns as a list, an int key that returns as a str, NaN that is not equal to
itself, an integer too big for 64 bits that a JSON reader turns into a
float) or cannot hold at all (an object) is refused at save time with the
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


#: Where a value sits, for the error message: a string, or parts joined lazily
#: (e.g. ``("step", "s1", "output")`` -> "step 's1' output") so that the
#: success path - every save - never formats a location.
Where = str | tuple[str, object, str]

_SCALARS = frozenset({str, bool, type(None)})
#: The integers every JSON reader we use keeps exact (orjson stores up to
#: unsigned 64 bits and would read anything larger back as a float).
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class _Refused(Exception):
    """Internal: carries the path (innermost first) up to ``json_copy``."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []


def json_copy(value: Any, where: Where) -> Any:
    """A deep copy of ``value`` if it is a JSON value, else an error naming ``where``.

    Copying while checking costs one walk either way, and keeps the stored
    document from sharing mutable containers with a live state.
    """
    kind = type(value)
    if kind in _SCALARS or (kind is int and _INT_MIN <= value <= _INT_MAX):
        return value
    if not value and (kind is dict or kind is list):
        return kind()  # the common empty metadata/context: no walk needed
    try:
        return _copy(value)
    except _Refused as exc:
        place = where if isinstance(where, str) else f"{where[0]} {where[1]!r} {where[2]}"
        raise NotJSONSerialisableError(f"{place}{''.join(reversed(exc.path))}: {exc.problem}") from None


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise _Refused(f"integer {value} does not fit in 64 bits; store it as a string")
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Refused(
                    f"key {key!r} of type {type(key).__name__} would come back as a string; use str keys"
                )
            kind = type(item)
            if kind in _SCALARS or (kind is int and _INT_MIN <= item <= _INT_MAX):
                out[key] = item
                continue
            try:
                out[key] = _copy(item)
            except _Refused as exc:
                exc.path.append(f"[{key!r}]")
                raise
        return out
    if kind is list:
        items = []
        for index, item in enumerate(value):
            kind = type(item)
            if kind in _SCALARS or (kind is int and _INT_MIN <= item <= _INT_MAX):
                items.append(item)
                continue
            try:
                items.append(_copy(item))
            except _Refused as exc:
                exc.path.append(f"[{index}]")
                raise
        return items
    if kind is float:
        if not math.isfinite(value):
            raise _Refused(f"{value!r} is not a JSON number; store it as a string or None")
        return value
    return _copy_subclass(value)


def _copy_subclass(value: Any) -> Any:
    """The slow path: subclasses of JSON types (str enums, OrderedDict) and refusals."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _copy(int(value))
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, float):
        return _copy(float(value))
    if isinstance(value, Mapping):
        return _copy(dict(value))
    if isinstance(value, list):
        return _copy(list(value))
    hint = "; use a list" if isinstance(value, (tuple, set, frozenset)) else ""
    raise _Refused(
        f"object of type {type(value).__name__} is not JSON-serialisable{hint} "
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
