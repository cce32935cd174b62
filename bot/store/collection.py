"""One kind of record (runs, reviews, outbox tasks) as files: a hot directory, an archive, an index.

Hot: ``<kind>/<id>.json``, what the bot still works on, indexed in memory
(see ``index``): summaries to select by, the documents read from disk when
a query returns them. Archive: ``archive/<kind>/<prefix>~<id>.json`` for
records that ended (an applied review, a completed run); the prefix makes
the questions asked of the archive answerable from file names alone (runs:
the creation time, so "the latest ten" reads ten files; reviews: the run,
so "the review of this run" reads that run's). A record moves by writing
the archive copy first, then removing the hot file: if a crash leaves both,
the archive copy wins and the next scan removes the hot one.

Every change to a kind's directories is made under its lock through
``Collection.writing``, which counts it for other processes and tells this
process's indexes what changed (``watch``), so a write costs no listing.
"""

from __future__ import annotations

import copy
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from loop_engine.jsonvalue import gc_paused

from .base import CorruptDocumentError, StoreError
from .documents import ARCHIVE_SEP, Quarantine, check_name, file_name, locked, parse, read_bytes, remove
from .index import ArchiveIndex, ArchiveNames, Changes, DirIndex, Entry, FileKey, file_key
from .recent import RecentWrites
from .watch import Watch, bump_count, count_in, read_count

__all__ = ["Collection", "R", "Spec", "creation_order", "number"]

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
    summarize: Callable[[R], Any]  # what the hot index keeps of a record: the fields hot queries select by
    ended: Callable[[R], bool] | None = None  # None: never archived
    archive_prefix: Callable[[R], str] | None = None
    name_of: Callable[[str], str | None] = file_name  # id -> file stem, None for an id that is refused
    fold: Callable[[R, list[dict[str, Any]]], None] | None = None  # a journal's lines into a record (reviews)


_NO_ARCHIVE = ArchiveNames({}, [])


def decode(spec: Spec[R], path: str | Path, raw: bytes) -> R:
    """The record in ``raw``; CorruptDocumentError/NewerFormatError naming ``path`` otherwise."""
    document = parse(path, raw, spec.supported)
    check_name(path, document.get("id"), spec.name_of)
    try:
        return spec.from_dict(document)
    except (KeyError, TypeError, ValueError, AttributeError, StoreError) as err:
        raise CorruptDocumentError(
            f"{path}: damaged document ({type(err).__name__}: {err}); restore it or move it aside"
        ) from err


class Collection(Generic[R]):
    """Records of one kind under ``root``; every method is safe across threads and processes.

    Lock order: this process's write lock (``_writes``), then the kind's
    file lock, then an index's own lock (held for a look or a listing);
    never the other way round.
    """

    def __init__(
        self,
        root: Path,
        spec: Spec[R],
        quarantine: Quarantine,
        *,
        write: Callable[[Path, dict[str, Any]], None],  # a method of the store
        wall: Callable[[], float],
        settle: float,
    ) -> None:
        self.spec = spec
        # Weakly, as the index's loader below is no method: without reference cycles a store and its
        # 20,000 index entries are freed when let go, not by a cycle collection that walks them all.
        self._write = weakref.WeakMethod(write)
        self.hot_dir = root / spec.kind
        self._hot_prefix = os.path.join(self.hot_dir, "")
        self.archive_dir = root / "archive" / spec.kind
        self._quarantine = quarantine
        lock_file = self._lock_file = self.hot_dir / ".lock"  # the archive is written under its lock too
        self._writes = threading.RLock()  # this process's writes: the indexes' listings wait for them
        hot, archive = (Watch(d, lock_file, wall=wall, settle=settle) for d in (self.hot_dir, self.archive_dir))
        self.hot: DirIndex[R, Any] = DirIndex(hot, self._writes, partial(decode, spec), spec.summarize)
        self.archive = ArchiveIndex(archive, self._writes)
        self._recent: RecentWrites[R] = RecentWrites()
        self._views: dict[str, tuple[tuple[int, int], Any]] = {}
        self._views_lock = threading.Lock()

    # -- documents ----------------------------------------------------------

    def decode(self, path: str | Path, raw: bytes) -> R:
        """The record in ``raw``; CorruptDocumentError/NewerFormatError naming ``path`` otherwise."""
        return decode(self.spec, path, raw)

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

    def archived(self) -> ArchiveNames:
        """The archive's file names, up to date (names only: no file is read, no hot scan)."""
        return self.archive.current() if self.spec.ended is not None else _NO_ARCHIVE

    def archived_path(self, stem: str) -> Path | None:
        name = self.archived().by_stem.get(stem)
        return None if name is None else self.archive_dir / f"{name}.json"

    # -- derived views ------------------------------------------------------

    def view(self, name: str, build: Callable[[Mapping[str, Entry[Any]]], V]) -> V:
        """``build(hot entries)`` (records also in the archive left out), cached until a directory changes."""
        hot_gen, entries = self.hot.current()
        by_id = self.archived().by_stem
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

    def live(self) -> Mapping[str, Entry[Any]]:
        """The hot entries, without leftovers of archived records."""
        return self.view("live", lambda live: live)

    # -- reading ------------------------------------------------------------

    def sync(self) -> dict[str, R]:
        """Bring the hot index up to date and do its upkeep; the records a listing read meanwhile.

        Only for the queries that return every hot record (``list_*``, what
        ``status`` asks): ``fetch`` takes them from here instead of reading
        each file twice. A long-lived process asks the others: records kept
        while the listing allocates its summaries pin memory the process
        never gives back.
        """
        loaded = self.hot.refresh()
        self.upkeep()
        return loaded

    def fetch(
        self,
        stems: Iterable[str],
        keep: Callable[[R], bool] | None = None,
        loaded: Mapping[str, R] | None = None,
        limit: int | None = None,
    ) -> list[R]:
        """The hot records of ``stems`` as they are now (the first ``limit`` kept): read from disk, or ``loaded``.

        The index chose the stems; a record changed since by someone else
        is judged again by ``keep``, and one gone from the hot set (archived,
        removed) or unreadable is left out - the next listing sets that aside.
        """
        records: list[R] = []
        if stems:  # nothing to return (an idle tick): nothing read, not even a journal's stat
            self._reading()
        with gc_paused():  # as in a listing: many new acyclic records
            for stem in stems:
                if limit is not None and len(records) >= limit:
                    break
                record = loaded.get(stem) if loaded else None
                if record is None:
                    path = f"{self._hot_prefix}{stem}.json"  # a str: a Path per record was a tenth of status
                    try:
                        record = self.decode(path, read_bytes(path))
                    except FileNotFoundError:
                        continue
                    except StoreError:
                        self.hot.forget()
                        continue
                record = self._folded(stem, record)
                if keep is None or keep(record):
                    records.append(record)
        return records

    def _reading(self) -> None:
        """Hot records are about to be read (``JournaledCollection`` reads its journal's new lines)."""

    def _folded(self, stem: str, record: R) -> R:
        """A hot record as it is, from its document as read (``JournaledCollection`` adds its journal lines)."""
        return record

    def find(self, doc_id: str) -> tuple[Path, R] | None:
        """Where the record is and what it holds (archive first: it wins over a leftover hot copy).

        Looks twice: a record archived by another process between the two
        reads is found in the archive the second time (the archive copy is
        written, and the archive directory changed, before the hot file goes).
        """
        stem = self.spec.name_of(doc_id)
        if stem is None:
            return None
        self._reading()
        for _ in range(2):
            archived = self.archived_path(stem) if self.spec.ended is not None else None
            path = archived or self.hot_dir / f"{stem}.json"
            try:
                raw = read_bytes(path)
            except FileNotFoundError:
                continue
            record = self.decode(path, raw)
            return path, (record if archived else self._folded(stem, record))
        self._quarantine.raise_if_quarantined(self.spec.kind, stem)
        return None

    # -- writing ------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[Changes[R]]:
        """Hold the kind's lock while the caller changes its directories, noting each change in ``Changes``.

        Then count the write for other processes and hand the changes to this
        process's indexes. A write that fails half-way is counted too, and
        its changes are not applied: every index, this one's too, lists again.
        """
        with self._writes, locked(self.hot_dir) as fd:
            tokens = self.hot.mark(), (self.archive.mark() if self.spec.ended is not None else None)
            self._recent.begin(count_in(fd))
            changes: Changes[R] = Changes()
            try:
                yield changes
            except BaseException:
                if changes.started:
                    bump_count(fd)
                    self._recent.end(None)
                raise
            if changes.started:
                count = bump_count(fd)
                self._recent.end(count)
                self.hot.own(tokens[0], count, changes.hot)
                self.archive.own(tokens[1], count, changes.added, changes.removed)

    def _put_file(self, changes: Changes[R], path: Path, document: dict[str, Any], record: R) -> None:
        changes.started = True
        write = self._write()
        assert write is not None, "a store outlives its collections"
        stem = path.name[: -len(".json")]
        self._recent.forget(stem)
        write(path, document)
        if path.parent == self.hot_dir:
            key = file_key(path)
            changes.hot[stem] = None if key is None else (key, record)
        else:
            changes.added.append(stem)

    def _gone(self, changes: Changes[R], path: Path) -> None:
        stem = path.name[: -len(".json")]
        self._recent.forget(stem)
        if path.parent == self.hot_dir:
            changes.hot[stem] = None
        else:
            changes.removed.append(stem)

    def _remove_file(self, changes: Changes[R], path: Path) -> None:
        changes.started = True
        remove(path)
        self._gone(changes, path)

    def put(self, record: R) -> None:
        stem = self.stem(record.id)
        with self.writing() as changes:
            try:
                found = self.find(record.id)
            except StoreError:  # a damaged or quarantined document of that id: the new one replaces it
                found = None
            self._store(changes, found[0] if found else self.hot_dir / f"{stem}.json", record)

    def add(self, record: R) -> bool:
        """Store a record that must be new (outbox tasks); False, writing nothing, if its file exists."""
        path = self.hot_dir / f"{self.stem(record.id)}.json"
        with self.writing() as changes:
            if path.exists():
                return False
            self._put_file(changes, path, record.to_dict(), record)
        return True

    def delete(self, stem: str) -> None:
        """Remove a hot record's file (gone already: nothing to do)."""
        with self.writing() as changes:
            self._remove_file(changes, self.hot_dir / f"{stem}.json")

    def update(self, doc_id: str, mutate: Callable[[R], T], unknown: Callable[[str], Exception]) -> T:
        """Run ``mutate`` on a fresh load under the lock; write (and archive) only if it changed the record.

        Fresh: read from the file, or the record this process wrote there
        last if nothing has written the file since (``RecentWrites``).
        """
        stem = self.spec.name_of(doc_id)
        if stem is None or not self._on_disk(doc_id) and self.find(doc_id) is None:  # before making a lock file
            raise unknown(doc_id)
        with self.writing() as changes:
            path, record = self._fresh(doc_id, stem, unknown)
            before = record.to_dict()
            result = mutate(record)
            self._write_changed(changes, doc_id, stem, path, record, before)
        return result

    def peek(self, doc_id: str) -> R | None:
        """A look at the record as this process last wrote it, if nothing has written it since; None otherwise.

        A shallow copy of the kept record: its fields may share lists with
        what the next update changes, so it is for looking only - for checks
        that are made again under the lock (who may vote on a review).
        """
        stem = self.spec.name_of(doc_id)
        if stem is None:
            return None
        with self._writes:
            kept = self._recent.peek(stem, file_key(self.hot_dir / f"{stem}.json"), read_count(self._lock_file))
            return copy.copy(kept) if kept is not None else None

    def _fresh(self, doc_id: str, stem: str, unknown: Callable[[str], Exception]) -> tuple[Path, R]:
        """Under the lock: where the record is and what it holds now - as this process last wrote it, or read."""
        hot = self.hot_dir / f"{stem}.json"
        kept = self._recent.take(stem, file_key(hot))
        found = (hot, kept) if kept is not None else self.find(doc_id)
        if found is None:
            raise unknown(doc_id)
        return found

    def _write_changed(
        self, changes: Changes[R], doc_id: str, stem: str, path: Path, record: R, before: dict[str, Any]
    ) -> None:
        """Under the lock: write the record if it differs from ``before``, and keep it for the next update."""
        hot = self.hot_dir / f"{stem}.json"
        after = record.to_dict()
        if after != before:
            if self.spec.name_of(record.id) != stem:
                raise StoreError(f"{self.spec.noun} {doc_id}: an update may not change its id to {record.id!r}")
            self._store(changes, path, record, after)
            written = changes.hot.get(stem) if path == hot else None
            if written is not None:
                self._recent.keep(stem, written[0], record)
        elif path == hot:
            self._recent.keep(stem, file_key(hot), record)

    def _on_disk(self, doc_id: str) -> bool:
        """Is there a file for ``doc_id``? A stat, where ``find`` would read and decode it (once more per vote)."""
        stem = self.spec.name_of(doc_id)
        if stem is None:
            return False
        if os.path.exists(f"{self._hot_prefix}{stem}.json"):
            return True
        return self.spec.ended is not None and self.archived_path(stem) is not None

    def _store(self, changes: Changes[R], current: Path, record: R, document: dict[str, Any] | None = None) -> None:
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
            self._put_file(changes, current, data, record)
            return
        target = self.archive_dir / self._archive_name(record)
        self._put_file(changes, target, data, record)  # the archive copy first: a crash now leaves both, it wins
        if current != target:
            self._remove_file(changes, current)
        hot = self.hot_dir / f"{self.stem(record.id)}.json"
        if hot != current:
            self._remove_file(changes, hot)

    # -- listing and upkeep ---------------------------------------------------

    def archived_records(self) -> list[R]:
        """Every archived record (reads every archive file: only for explicit ``archived=True``)."""
        records = []
        for name in self.archived().ordered:
            path = self.archive_dir / f"{name}.json"
            try:
                records.append(self.decode(path, read_bytes(path)))
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
            with self.writing() as changes:
                hot = self.hot_dir / f"{stem}.json"
                try:
                    found = self.find(stem)
                except StoreError:
                    continue  # an unreadable archive copy: archived_records() sets it aside and reports it
                if found is None or not hot.exists():
                    continue
                path, record = found
                if path != hot:
                    self._remove_file(changes, hot)  # the archive copy won
                elif self.spec.ended(record):
                    self._store(changes, hot, record)

    def _upkeep_todo(self, live: Mapping[str, Entry[Any]]) -> list[str]:
        leftovers = [s for s in self.hot.current()[1] if s not in live]
        return leftovers + [s for s, e in live.items() if getattr(e.summary, "ended", False)]

    def _set_aside(self, path: Path, err: Exception, key: FileKey | None) -> None:
        with self.writing() as changes:
            if key is not None and file_key(path) != key:
                return  # rewritten since it was read: the next scan judges the new content
            changes.started = True
            if self._quarantine.move(path, self.spec.kind, err) is not None:
                self._gone(changes, path)
