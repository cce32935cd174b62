"""One JSON document per file: names, encoding, checked reads, locks and quarantine.

The pieces ``FileStore`` and its collections share. Reads check a document
against the name it was read under (a copy of demo-1 saved as demo-2.json
would otherwise take demo-2's votes); writes go through
loop_engine.atomic; a document that cannot be used is moved to
``quarantine/<kind>/`` with a ``.why`` note beside it, so one bad file is
reported (``problems()``) instead of stopping every review.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from loop_engine.atomic import atomic_write_bytes, fsync_directory

from .base import CorruptDocumentError, NewerFormatError, StoreError

__all__ = [
    "SAFE_ID",
    "file_name",
    "encode",
    "parse",
    "read_bytes",
    "read_stat",
    "read_document",
    "check_name",
    "locked",
    "write",
    "remove",
    "Quarantine",
    "DocumentWriter",
]

log = logging.getLogger("bot.store.files")

SAFE_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
#: Separates the sort/lookup prefix of an archived file's name from the id (ids never contain it).
ARCHIVE_SEP = "~"


def file_name(doc_id: str) -> str | None:
    """The file stem for an id (lower-cased: lookups ignore case), or None if it could escape its directory."""
    if not isinstance(doc_id, str):
        return None
    name = doc_id.strip().lower()
    if not SAFE_ID.fullmatch(name) or ".." in name:
        return None
    return name


def encode(document: dict[str, Any]) -> bytes:
    """Indented UTF-8 JSON, by orjson (json.dumps was most of a save); json for what orjson refuses (huge ints)."""
    try:
        data: bytes = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        return data + b"\n"
    except (orjson.JSONEncodeError, TypeError):
        return (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def parse(path: str | os.PathLike[str], raw: bytes, supported: int) -> dict[str, Any]:
    """The document in ``raw`` read from ``path``, refusing damaged or newer ones by file name."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # what json.dumps wrote and orjson refuses (NaN, Infinity)
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptDocumentError(
                f"{path}: not a valid JSON document ({err}); restore it from a backup or move it aside"
            ) from err
    if not isinstance(document, dict) or isinstance(document.get("format"), bool) or not isinstance(
        document.get("format"), int
    ):
        raise CorruptDocumentError(f"{path}: not a loopbot document (no integer 'format' field); move it aside")
    if document["format"] > supported:
        raise NewerFormatError(
            f"{path}: format version {document['format']} is newer than this loopbot reads "
            f"(up to {supported}); upgrade loopbot to use this state_dir"
        )
    return document


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A document's bytes by plain ``os`` calls: a third of what ``Path.read_bytes`` costs, paid 20,000
    times by ``status`` on a big state dir."""
    return read_stat(path)[1]


def read_stat(path: str | os.PathLike[str]) -> tuple[os.stat_result, bytes]:
    """The file's ``stat`` as opened and its bytes: a listing that reads a file anyway needs no ``lstat``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        data = os.read(fd, st.st_size + 1)  # a whole document in one call, unless it grew since the fstat
        while len(data) > st.st_size and (more := os.read(fd, 1 << 16)):
            data += more
    finally:
        os.close(fd)
    return st, data


def read_document(path: Path, supported: int) -> dict[str, Any] | None:
    """The document at ``path``, None if there is none."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return parse(path, raw, supported)


def check_name(path: str | os.PathLike[str], doc_id: Any, name_of: Callable[[str], str | None] = file_name) -> None:
    """Refuse a document whose id is not the one its file name says (issue 12.4).

    Archived files are named ``<prefix>~<id>.json``: the id is the last part.
    """
    name = os.path.basename(path)
    stem = name[: -len(".json")] if name.endswith(".json") else name
    expected = stem.rsplit(ARCHIVE_SEP, 1)[-1]
    if not isinstance(doc_id, str) or name_of(doc_id) != expected:
        raise CorruptDocumentError(
            f"{path}: holds id {doc_id!r}, not {expected!r} as its name says; "
            "a copied or renamed document would take the other one's votes - move it aside"
        )


@contextmanager
def locked(directory: Path) -> Iterator[int]:
    """Exclusive ``fcntl.flock`` on ``directory/.lock``: one writer across threads and processes.

    flock locks belong to an open file description, so they exclude other
    threads (each acquisition opens its own descriptor) as well as other
    processes, and the kernel drops them when a holder is killed. Yields the
    lock file's descriptor: collections count their writes in it (``watch``).
    """
    directory.mkdir(parents=True, exist_ok=True)
    # O_NOFOLLOW: a link planted as .lock must not make the bot create a file outside state_dir
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def write(path: Path, data: bytes) -> None:
    """The one way documents are written: atomically, durably (see loop_engine.atomic)."""
    atomic_write_bytes(path, data)


def remove(path: Path) -> bool:
    """Unlink durably; False if it was already gone."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_directory(path.parent)
    return True


class DocumentWriter:
    """Base of the store: every document write goes through ``_write``.

    One method, so a test can stand in for kill -9 right after any write
    (tests/bot/test_runner.py subclasses the store and overrides it).
    """

    def _write(self, path: Path, document: dict[str, Any] | bytes) -> None:
        write(path, document if isinstance(document, bytes) else encode(document))


class Quarantine:
    """Documents set aside under ``quarantine/<kind>/``, each with a ``<name>.why`` saying why.

    Moved, not deleted: a person may repair one and move it back. The note
    keeps the reason across restarts so ``problems()`` and a later lookup by
    id can say what happened to it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root / "quarantine"

    def move(self, path: Path, kind: str, error: Exception) -> Path | None:
        """Move ``path`` aside (the caller holds the kind's lock); None if it vanished meanwhile."""
        target_dir = self.root / kind
        target = target_dir / path.name
        n = 1
        while target.exists() or target.with_name(target.name + ".why").exists():
            n += 1
            target = target_dir / f"{path.name}.{n}"
        why = {"error": type(error).__name__, "message": str(error), "file": f"{kind}/{path.name}"}
        write(target.with_name(target.name + ".why"), encode(why))
        try:
            os.replace(path, target)
        except FileNotFoundError:
            remove(target.with_name(target.name + ".why"))
            return None
        fsync_directory(path.parent)
        fsync_directory(target_dir)
        log.error("%s; moved it to %s, the other documents are served", error, target)
        return target

    def note(self, kind: str, stem: str) -> dict[str, Any] | None:
        """Why the document ``<kind>/<stem>.json`` was quarantined, if it was."""
        with contextlib.suppress(FileNotFoundError, ValueError, StoreError):
            raw = (self.root / kind / f"{stem}.json.why").read_bytes()
            note = orjson.loads(raw)
            return note if isinstance(note, dict) else None
        return None

    def raise_if_quarantined(self, kind: str, stem: str) -> None:
        """A lookup of a quarantined id says so, with the original error type."""
        note = self.note(kind, stem)
        if note is None:
            return
        where = self.root / kind / f"{stem}.json"
        message = f"{note.get('message')} (quarantined: {where})"
        if note.get("error") == NewerFormatError.__name__:
            raise NewerFormatError(message)
        raise CorruptDocumentError(message)

    def problems(self) -> list[str]:
        """'<kind>/<file>: <why> (moved to ...)' for every quarantined document, oldest kind first."""
        found = []
        note: Any = None
        if not self.root.is_dir():
            return []
        for kind_dir in sorted(p for p in self.root.iterdir() if p.is_dir()):
            for why in sorted(kind_dir.glob("*.why")):
                try:
                    note = orjson.loads(why.read_bytes())
                    message = note["message"] if isinstance(note, dict) else "unreadable note"
                except (OSError, ValueError, KeyError, TypeError):
                    message = "quarantined (its note is unreadable)"
                newer = isinstance(note, dict) and note.get("error") == NewerFormatError.__name__
                kind_word = "newer format: " if newer else ""
                found.append(f"{kind_dir.name}/{why.name[: -len('.why')]}: {kind_word}{message}")
        return found
