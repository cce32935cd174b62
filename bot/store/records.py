"""How records are named, keyed and checked in the store, whatever engine keeps them.

Ids are looked up case-insensitively (``key_of``: the key), a stored
document is checked against the key it was read under and refused when a
newer loopbot wrote it (``parse``), and a snapshot holds the engine's state
in one of two formats (``engine_state``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from .base import CorruptDocumentError, NewerFormatError, StoreError

__all__ = ["SNAPSHOT_FORMAT", "FEW_IDS", "key_of", "checked_key", "mutate_record", "encode", "parse", "check_name",
           "number", "run_key", "one_edit", "engine_state", "delivery_digest"]

T = TypeVar("T")
SAFE_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
#: 1: {"snapshot": <state dict>}; 2: {"engine": <encode_state document>} (the engine's bytes, wrapped).
SNAPSHOT_FORMAT = 2
#: Up to this many reviews every id is a candidate for "did you mean"; past it only ids one edit away.
FEW_IDS = 2000
_ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_."


def key_of(doc_id: str) -> str | None:
    """The key of an id (lower-cased: lookups ignore case), or None if it is not a safe id."""
    name = doc_id.strip().lower() if isinstance(doc_id, str) else ""
    return name if SAFE_ID.fullmatch(name) and ".." not in name else None


def checked_key(noun: str, doc_id: str) -> str:
    """The key of an id, or a StoreError saying what a ``noun`` id may hold."""
    key = key_of(doc_id)
    if key is None:
        raise StoreError(f"invalid {noun} id {doc_id!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)")
    return key


def mutate_record(noun: str, record_id: str, key: str, record: Any, mutate: Callable[[Any], T],
                  write: Callable[[], object], name_of: Callable[[str], str | None] = key_of) -> T:
    """``mutate(record)``, and ``write()`` if that changed it; a change of its id is refused (the record would
    leave the row it was read from under another id)."""
    before = record.to_dict()
    result = mutate(record)
    if record.to_dict() != before:
        if name_of(record.id) != key:
            raise StoreError(f"{noun} {record_id}: an update may not change its id to {record.id!r}")
        write()
    return result


def number(doc_id: str) -> int:
    """The trailing number of an id ("demo-12" -> 12), so demo-10 sorts after demo-9."""
    _head, sep, tail = doc_id.rpartition("-")
    return int(tail) if sep and tail.isdigit() else 0


def delivery_digest(key: str) -> str:
    """The name a delivery key is kept under (any text, of any length: a webhook's id, a comment's)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def run_key(run_id: str) -> str:
    """The key a run's reviews point at: its id's key, or a hash if that would be too long."""
    stem = key_of(run_id)
    if stem is not None and len(stem) <= 100:
        return stem
    return "h" + hashlib.sha256(run_id.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32]


def one_edit(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion away from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in _ID_CHARS}
    edits |= {a + c + b for a, b in splits for c in _ID_CHARS}
    return edits


def encode(document: dict[str, Any]) -> str:
    """JSON text with sorted keys: orjson (five times faster on a long history), else json, which keeps lone
    surrogates and integers past 64 bits. (orjson writes NaN as null; the grammar refuses NaN in a vote.)"""
    try:
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(document, sort_keys=True)


def parse(where: str | os.PathLike[str], raw: bytes | str, supported: int) -> dict[str, Any]:
    """The document in ``raw`` read from ``where``, refusing damaged or newer ones by name."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # what json.dumps wrote and orjson refuses (NaN, Infinity, lone surrogates)
            document = json.loads(raw if isinstance(raw, str) else raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptDocumentError(f"{where}: not a valid JSON document ({err}); restore it from a backup") from err
    if not isinstance(document, dict) or type(document.get("format")) is not int:
        raise CorruptDocumentError(f"{where}: not a loopbot document (no integer 'format' field)")
    if document["format"] > supported:
        raise NewerFormatError(f"{where}: format version {document['format']} is newer than this loopbot reads "
                               f"(up to {supported}); upgrade loopbot to use this store")
    return document


def check_name(where: str, key: str, doc_id: Any, name_of: Callable[[str], str | None] = key_of) -> None:
    """Refuse a document whose id is not the key it is stored under (it would take the other one's votes)."""
    if not isinstance(doc_id, str) or name_of(doc_id) != key:
        raise CorruptDocumentError(f"{where}: holds id {doc_id!r}, not {key!r} as its key says; "
                                   "a copied or renamed document would take the other one's votes")


def engine_state(where: Any, document: dict[str, Any]) -> dict[str, Any]:
    """The state dict inside a snapshot document of either format, checked by the engine's own loader's rule."""
    from loop_engine.errors import CorruptStateError, SchemaVersionError
    from loop_engine.persistence import saved_state

    if document["format"] == 1:
        snapshot = document.get("snapshot")
        if not isinstance(snapshot, dict):
            raise CorruptDocumentError(f"{where}: damaged snapshot document (no 'snapshot' object)")
        return snapshot
    try:
        return saved_state(where, document.get("engine"))
    except SchemaVersionError as err:
        raise NewerFormatError(str(err)) from err
    except CorruptStateError as err:
        raise CorruptDocumentError(f"damaged snapshot document: {err}") from err
