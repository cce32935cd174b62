"""JSON values, checked: what may be stored, and where it failed if it may not.

Step outputs, observation contents, metadata and review contexts are typed
``Any`` because components put whatever they like there. Stored state must
come back *equal*, so anything that JSON would silently change (a tuple that
returns as a list, an int key that returns as a str, NaN that is not equal to
itself, an integer too big for 64 bits that a JSON reader turns into a
float) or cannot hold at all (an object, a datetime, a set) is refused at
save time with the place it was found - never turned into ``str()``.

``check_json`` only looks (no copies: the hot path of every save); orjson
then writes the value, with ``orjson_default`` turning the few accepted
subclasses it cannot write (non-dict mappings, float subclasses) into plain
values. ``json_copy`` is check + orjson round trip, for callers that want
plain data sharing nothing with the original.

Also here, shared by every stored record: datetimes written so they read
back equal (``iso_datetime``, ``orjson_datetime``), enums and datetimes
read back with messages that say what is wrong, and ``gc_paused`` for
building or taking apart large documents.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar

import orjson

from .errors import PersistenceError

__all__ = [
    "NotJSONSerialisableError",
    "check_json",
    "json_copy",
    "orjson_default",
    "iso_datetime",
    "orjson_datetime",
    "gc_paused",
    "decode_datetime",
    "decode_enum",
    "locate_bad_string",
]

E = TypeVar("E", bound=Enum)
T = TypeVar("T")


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
    """Internal: carries the path (innermost first) up to ``check_json``."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []


def check_json(value: T, where: Where) -> T:
    """``value`` itself if it is a JSON value; else ``NotJSONSerialisableError`` naming ``where``."""
    kind = type(value)
    if kind in _SCALARS or (kind is int and _INT_MIN <= value <= _INT_MAX) or (kind is dict and not value):  # type: ignore[operator]
        return value
    try:
        _check(value)
    except _Refused as exc:
        raise NotJSONSerialisableError(f"{_place(where)}{''.join(reversed(exc.path))}: {exc.problem}") from None
    except RecursionError:
        raise NotJSONSerialisableError(
            f"{_place(where)}: nested too deeply, or contains itself; store a flatter value"
        ) from None
    return value


def _place(where: Where) -> str:
    return where if isinstance(where, str) else f"{where[0]} {where[1]!r} {where[2]}"


def json_copy(value: Any, where: Where) -> Any:
    """A plain deep copy of ``value`` if it is a JSON value, else an error naming ``where``."""
    check_json(value, where)
    if type(value) in _SCALARS:
        return value
    try:
        return orjson.loads(orjson.dumps(value, default=orjson_default))
    except orjson.JSONEncodeError as exc:
        place = where if isinstance(where, str) else f"{where[0]} {where[1]!r} {where[2]}"
        raise NotJSONSerialisableError(f"{place}{locate_bad_string(value) or ''}: {exc}") from None


def orjson_default(value: Any) -> Any:
    """orjson's fallback for the accepted types it cannot write itself."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"object of type {type(value).__name__} is not JSON-serialisable")


def _check(value: Any) -> None:
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise _Refused(f"key {key!r} of type {type(key).__name__} would come back as a string; use str keys")
            kind = type(item)
            if kind in _SCALARS or (kind is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                _check(item)
            except _Refused as exc:
                exc.path.append(f"[{key!r}]")
                raise
    elif kind is list:
        for index, item in enumerate(value):
            kind = type(item)
            if kind in _SCALARS or (kind is int and _INT_MIN <= item <= _INT_MAX):
                continue
            try:
                _check(item)
            except _Refused as exc:
                exc.path.append(f"[{index}]")
                raise
    elif kind in _SCALARS:
        pass
    elif kind is int:
        if not _INT_MIN <= value <= _INT_MAX:
            raise _Refused(f"integer {value} does not fit in 64 bits; store it as a string")
    elif kind is float:
        if not math.isfinite(value):
            raise _Refused(f"{value!r} is not a JSON number; store it as a string or None")
    else:
        _check_subclass(value)


def _check_subclass(value: Any) -> None:
    """The slow path: subclasses of JSON types (str enums, OrderedDict) and refusals."""
    if isinstance(value, bool | str):
        return
    if isinstance(value, int):
        _check(int(value))
    elif isinstance(value, float):
        _check(float(value))
    elif isinstance(value, Mapping):
        _check(dict(value))
    elif isinstance(value, list):
        _check(list(value))
    else:
        hint = "; use a list" if isinstance(value, tuple | set | frozenset) else ""
        raise _Refused(
            f"object of type {type(value).__name__} is not JSON-serialisable{hint} "
            "(store dicts, lists, strings, numbers, booleans or None)"
        )


def locate_bad_string(value: Any, path: str = "") -> str | None:
    """Where in checked JSON data a string cannot be written as UTF-8 (a lone surrogate).

    Only called after an encoder refused the data: checking every string on
    every save would cost more than the save itself.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
        return None
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and locate_bad_string(key) is not None:
            return f"{path} key {key!r}"
        found = locate_bad_string(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


def iso_datetime(value: datetime) -> str:
    """``isoformat()``, but an offset with microseconds is written as UTC (the same instant).

    Python 3.11's ``fromisoformat`` drops the microseconds of an offset, so
    the stored time would come back different.
    """
    offset = value.utcoffset()
    if offset is not None and offset.microseconds:
        value = value.astimezone(UTC)
    return value.isoformat()


def orjson_datetime(value: datetime | None) -> datetime | str | None:
    """Naive datetimes as they are: orjson writes exactly ``isoformat()``'s text, 25x faster.

    orjson would drop the seconds of an offset like +00:00:07 and refuses
    datetime subclasses, so aware datetimes and subclasses are formatted here.
    """
    if value is None or (value.tzinfo is None and type(value) is datetime):
        return value
    return iso_datetime(value)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic GC from re-scanning the heap while a state is built or taken apart.

    A 1,000-step state is ~40,000 new acyclic objects; the collections they
    trigger cost about a third of a load. Nested use and a GC that is already
    off are both left as found.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


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
