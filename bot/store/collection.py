"""One kind of record (runs, reviews, outbox tasks) as files: a hot directory, an archive, an index.

Hot: ``<kind>/<id>.json``, what the bot still works on, indexed in memory
(see ``index``). Archive: ``archive/<kind>/<prefix>~<id>.json`` for records
that ended (an applied review, a completed run); the prefix makes the
questions asked of the archive answerable from file names alone (runs: the
creation time, so "the latest ten" reads ten files; reviews: the run, so
"the review of this run" reads that run's). A record moves by writing the
archive copy first, then removing the hot file: if a crash leaves both, the
archive copy wins and the next scan removes the hot one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from .base import CorruptDocumentError, StoreError
from .documents import ARCHIVE_SEP, Quarantine, check_name, file_name, locked, parse, remove
from .index import DirIndex, Entry

__all__ = ["Collection", "Spec", "creation_order", "number"]

T = TypeVar("T")
V = TypeVar("V")


class Record(Protocol):
    id: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


def number(doc_id: str) -> int:
    """The trailing number of an id ("demo-12" -> 12), so demo-10 sorts after demo-9."""
    head, sep, tail = doc_id.rpartition("-")
    return int(tail) if sep and tail.isdigit() else 0


def creation_order(record: Record) -> tuple[datetime, int, str]:
    return record.created_at, number(record.id), record.id


def created_key(created_at: datetime) -> str:
    """A creation time as a fixed-width sortable name part (UTC; a naive time is taken as UTC)."""
    utc = created_at.astimezone(UTC) if created_at.tzinfo is not None else created_at
    return utc.strftime("%Y%m%d%H%M%S%f").zfill(20)


@dataclass(frozen=True)
class Spec(Generic[R]):
    """What a ``Collection`` needs to know about its records."""

    kind: str  # directory name: "runs"
    noun: str  # for messages: "run"
    supported: int  # newest document format this loopbot reads
    from_dict: Callable[[dict[str, Any]], R]
    summarize: Callable[[R], Any]  # what the hot index keeps of a record
    ended: Callable[[R], bool] | None = None  # None: never archived
    archive_prefix: Callable[[R], str] | None = None
    name_of: Callable[[str], str | None] = file_name  # id -> file stem, None for an id that is refused


class Collection(Generic[R]):
    """Records of one kind under ``root``; every method is safe across threads and processes.

    Lock order: a kind's file lock may be held while an index is asked (the
    index lock is held only for a scan), never the other way round.
    """

    def __init__(
        self,
        root: Path,
        spec: Spec[R],
        quarantine: Quarantine,
        *,
        write: Callable[[Path, dict[str, Any]], None],
        wall: Callable[[], float],
        settle: float,
    ) -> None:
        self.spec = spec
        self._write = write
        self.hot_dir = root / spec.kind
        self.archive_dir = root / "archive" / spec.kind
        self._quarantine = quarantine
        self.hot: DirIndex[Any] = DirIndex(self.hot_dir, self._summary, wall=wall, settle=settle)
        self.archive: DirIndex[None] = DirIndex(self.archive_dir, None, wall=wall, settle=settle)
        self._views: dict[str, tuple[tuple[int, int], Any]] = {}
        self._views_lock = threading.Lock()
        self._by_id: tuple[int, tuple[dict[str, str], list[str], dict[str, list[str]]]] | None = None

    # -- documents ----------------------------------------------------------

    def decode(self, path: Path, raw: bytes) -> R:
        """The record in ``raw``; CorruptDocumentError/NewerFormatError naming ``path`` otherwise."""
        document = parse(path, raw, self.spec.supported)
        check_name(path, document.get("id"), self.spec.name_of)
        try:
            return self.spec.from_dict(document)
        except (KeyError, TypeError, ValueError, AttributeError, StoreError) as err:
            raise CorruptDocumentError(
                f"{path}: damaged document ({type(err).__name__}: {err}); restore it or move it aside"
            ) from err

    def _summary(self, path: Path, raw: bytes) -> Any:
        return self.spec.summarize(self.decode(path, raw))

    def stem(self, doc_id: str) -> str:
        name = self.spec.name_of(doc_id)
        if name is None:
            raise StoreError(
                f"invalid {self.spec.noun} id {doc_id!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)"
            )
        return name

    def _archive_name(self, record: R) -> str:
        assert self.spec.archive_prefix is not None
        return f"{self.spec.archive_prefix(record)}{ARCHIVE_SEP}{self.stem(record.id)}.json"

    def archived_names(self) -> dict[str, str]:
        """{stem: archive file name} of every archived record (names only: no file is read, no hot scan)."""
        return self._archive_listing()[0]

    def archived_sorted(self) -> list[str]:
        """Archive file names (without .json) in name order: for runs, creation order."""
        return self._archive_listing()[1]

    def archived_with_prefix(self, prefix: str) -> list[str]:
        """Stems of the archived records whose name starts with ``prefix`` (reviews: of one run)."""
        return self._archive_listing()[2].get(prefix, [])

    def _archive_listing(self) -> tuple[dict[str, str], list[str], dict[str, list[str]]]:
        if self.spec.ended is None:
            return {}, [], {}
        generation, names = self.archive.current()
        with self._views_lock:
            cached = self._by_id
            if cached is not None and cached[0] == generation:
                return cached[1]
        ordered = sorted(names)
        by_id: dict[str, str] = {}
        by_prefix: dict[str, list[str]] = {}
        for name in ordered:
            prefix, _, stem = name.rpartition(ARCHIVE_SEP)
            by_id[stem] = name
            by_prefix.setdefault(prefix, []).append(stem)
        listing = (by_id, ordered, by_prefix)
        with self._views_lock:
            self._by_id = (generation, listing)
        return listing

    def archived_path(self, stem: str) -> Path | None:
        name = self.archived_names().get(stem)
        return None if name is None else self.archive_dir / f"{name}.json"

    # -- derived views ------------------------------------------------------

    def view(self, name: str, build: Callable[[Mapping[str, Entry[Any]]], V]) -> V:
        """``build(hot entries)`` (records also in the archive left out), cached until a directory changes."""
        hot_gen, entries = self.hot.current()
        by_id = self.archived_names()
        stamp = (hot_gen, self.archive.generation)
        with self._views_lock:
            cached = self._views.get(name)
            if cached is not None and cached[0] == stamp:
                value: V = cached[1]
                return value
        live: Mapping[str, Entry[Any]] = entries
        if by_id and not by_id.keys().isdisjoint(entries):  # leftovers of a crash: the archive copy wins
            live = {s: e for s, e in entries.items() if s not in by_id}
        value = build(live)
        with self._views_lock:
            self._views[name] = (stamp, value)
        return value

    def records(self, entries: Mapping[str, Entry[Any]], stems: list[str] | None = None) -> list[R]:
        """Fresh records for ``stems`` (default all) built from the indexed bytes: no file is read."""
        chosen = entries if stems is None else stems
        return [self.decode(self.hot_dir / f"{s}.json", entries[s].raw) for s in chosen]

    # -- get / put / update -------------------------------------------------

    def find(self, doc_id: str) -> tuple[Path, R] | None:
        """Where the record is and what it holds (archive first: it wins over a leftover hot copy).

        Looks twice: a record archived by another process between the two
        reads is found in the archive the second time (the archive copy is
        written, and the archive directory changed, before the hot file goes).
        """
        stem = self.spec.name_of(doc_id)
        if stem is None:
            return None
        for _ in range(2):
            archived = self.archived_path(stem) if self.spec.ended is not None else None
            path = archived or self.hot_dir / f"{stem}.json"
            try:
                raw = path.read_bytes()
            except FileNotFoundError:
                continue
            return path, self.decode(path, raw)
        self._quarantine.raise_if_quarantined(self.spec.kind, stem)
        return None

    def put(self, record: R) -> None:
        stem = self.stem(record.id)
        with locked(self.hot_dir):
            try:
                found = self.find(record.id)
            except StoreError:  # a damaged or quarantined document of that id: the new one replaces it
                found = None
            self._store(found[0] if found else self.hot_dir / f"{stem}.json", record)

    def update(self, doc_id: str, mutate: Callable[[R], T], unknown: Callable[[str], Exception]) -> T:
        """Run ``mutate`` on a fresh load under the lock; write (and archive) only if it changed the record."""
        if self.find(doc_id) is None:  # fail fast, before creating any lock file
            raise unknown(doc_id)
        with locked(self.hot_dir):
            found = self.find(doc_id)
            if found is None:
                raise unknown(doc_id)
            path, record = found
            before = record.to_dict()
            result = mutate(record)
            after = record.to_dict()
            if after != before:
                if self.spec.name_of(record.id) != self.spec.name_of(doc_id):
                    raise StoreError(f"{self.spec.noun} {doc_id}: an update may not change its id to {record.id!r}")
                self._store(path, record, after)
        return result

    def _store(self, current: Path, record: R, document: dict[str, Any] | None = None) -> None:
        """Write ``record`` where it belongs now (caller holds the lock); ``current`` is where it was."""
        data = record.to_dict() if document is None else document
        ended = self.spec.ended is not None and self.spec.ended(record)
        in_archive = current.parent == self.archive_dir
        if in_archive and not ended:
            raise StoreError(
                f"{self.spec.noun} {record.id} has ended and is archived; it cannot become "
                f"{getattr(record, 'status', 'active')!r} again - start a new one"
            )
        if not ended:
            self._write(current, data)
            return
        target = self.archive_dir / self._archive_name(record)
        self._write(target, data)  # the archive copy first: a crash now leaves both, and the archive wins
        if current != target:
            remove(current)
        hot = self.hot_dir / f"{self.stem(record.id)}.json"
        if hot != current:
            remove(hot)
        self.archive.forget()

    # -- listing and upkeep ---------------------------------------------------

    def live(self) -> Mapping[str, Entry[Any]]:
        """The hot entries, without leftovers of archived records."""
        return self.view("live", lambda live: live)

    def hot_records(self) -> list[R]:
        return self.records(self.live())

    def archived_records(self) -> list[R]:
        """Every archived record (reads every archive file: only for explicit ``archived=True``)."""
        records = []
        for name in sorted(self.archive.current()[1]):
            path = self.archive_dir / f"{name}.json"
            try:
                records.append(self.decode(path, path.read_bytes()))
            except FileNotFoundError:
                continue
            except StoreError as err:
                self._set_aside(path, err, None)
        return records

    def upkeep(self) -> None:
        """Quarantine unreadable hot files, drop hot leftovers of archived records, archive ended ones.

        Cheap when nothing changed: the to-do list is a cached view. Each
        step re-checks under the lock, since another process may have done it.
        """
        for stem, (key, err) in self.hot.bad().items():
            self._set_aside(self.hot_dir / f"{stem}.json", err, key)
        if self.spec.ended is None:
            return
        for stem in self.view("upkeep", self._upkeep_todo):
            with locked(self.hot_dir):
                hot = self.hot_dir / f"{stem}.json"
                try:
                    found = self.find(stem)
                except StoreError:
                    continue  # an unreadable archive copy: archived_records() sets it aside and reports it
                if found is None or not hot.exists():
                    continue
                path, record = found
                if path != hot:
                    remove(hot)  # the archive copy won
                elif self.spec.ended(record):
                    self._store(hot, record)

    def _upkeep_todo(self, live: Mapping[str, Entry[Any]]) -> list[str]:
        leftovers = [s for s in self.hot.current()[1] if s not in live]
        return leftovers + [s for s, e in live.items() if getattr(e.summary, "ended", False)]

    @staticmethod
    def _key(path: Path) -> tuple[int, int, int] | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def _set_aside(self, path: Path, err: Exception, key: tuple[int, int, int] | None) -> None:
        with locked(self.hot_dir):
            if key is not None and self._key(path) != key:
                return  # rewritten since it was read: the next scan judges the new content
            self._quarantine.move(path, self.spec.kind, err)

