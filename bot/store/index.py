"""In-process indexes of the store's directories: small summaries, kept up to date without rereading.

Why: the serve tick, /healthz and ``status`` ask the same questions every
half second (what is open, what is due, how many of each); reading every
document each time made an idle bot's cost grow with the reviews ever
stored. The indexes answer those questions from memory and cost a ``stat``
and a small read per question while nothing changes (``watch``).

What is kept: of a hot directory, each file's stat key and the summary its
collection makes of it (status, order, deadline: what the hot queries
select by) - never the document, so memory grows with a few fields per
document, not with their bytes; a query reads the documents it returns. Of
an archive, only the file names, with the orders its look-ups need.

A listing ``stat``s every file and reads only those whose (inode, mtime,
size) changed. A write this process makes under the kind's lock updates
the index in place (``own``) when nothing else changed since it looked.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from loop_engine.jsonvalue import gc_paused

from .documents import ARCHIVE_SEP, read_bytes, read_stat
from .watch import Seen, Watch

__all__ = ["ArchiveIndex", "ArchiveNames", "Changes", "DirIndex", "Entry", "FileKey", "file_key"]

R = TypeVar("R")
S = TypeVar("S")

#: The hash of a file's (inode, mtime ns, size): a file that keeps it was not rewritten. One int, not the
#: three (a third of an entry's memory); a rewrite that kept the hash would need a 64-bit collision.
FileKey = int


def file_key(path: Path) -> FileKey | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return _key(st)


def _key(st: os.stat_result) -> FileKey:
    return hash((st.st_ino, st.st_mtime_ns, st.st_size))


@dataclass
class Changes(Generic[R]):
    """What one locked write did to a kind's directories, for this process's indexes (``Collection.writing``)."""

    hot: dict[str, tuple[FileKey, R] | None] = field(default_factory=dict)  # stem -> (key, record) or None: gone
    added: list[str] = field(default_factory=list)  # archive names written
    removed: list[str] = field(default_factory=list)  # archive names gone
    started: bool = False  # something may have changed on disk (set before each change is tried)


@dataclass(frozen=True, slots=True)
class Entry(Generic[S]):
    """One indexed file: its stat key and what the collection's summary made of it."""

    key: FileKey
    summary: S


class _Watched:
    """The refresh protocol both indexes share: list when ``watch`` says so, else apply own writes."""

    def __init__(self, watch: Watch, writes: threading.RLock) -> None:
        self.watch = watch
        self._lock = threading.Lock()
        self._writes = writes  # held by this process's writes to the kind (``Collection.writing``)
        self._seen: Seen | None = None
        self.generation = 0  # bumped whenever the contents change: callers cache what they derive by it
        self.scans = 0  # for tests and the bench: how often the directory was listed

    @contextmanager
    def _fresh(self, loaded: dict[str, Any] | None = None) -> Iterator[None]:
        """Hold ``_lock`` with the contents up to date (``loaded``: keep the records a listing reads).

        A listing first waits for a write of this process that is under way:
        the write moves the mtime before it updates the index, and a listing
        in between would be a wasted one.
        """
        with self._lock:
            seen = self.watch.check(self._seen)
            if seen is not None:
                self._seen = seen
                yield
                return
        with self._writes, self._lock:
            self._refresh(loaded)
            yield

    def _refresh(self, loaded: dict[str, Any] | None) -> None:
        """List the directory if it still may have changed (the caller holds ``_lock``)."""
        seen = self.watch.check(self._seen)
        if seen is not None:
            self._seen = seen
            return
        count, marker = self.watch.count(), self.watch.marker()  # before the listing: what it surely includes
        self.scans += 1
        self._list(loaded)
        # a first look, or an mtime that moved with no write counted (a writer that takes no lock): look
        # once more when a young mtime has settled, in case that writer wrote again in its clock tick
        uncounted = self._seen is None or (self._seen.marker != marker and self._seen.count == count)
        self._seen = self.watch.seen(count, marker, listed=uncounted)

    def _list(self, loaded: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def forget(self) -> None:
        """List again at the next question."""
        with self._lock:
            self._seen = None

    def mark(self) -> Seen | None:
        """Before an own write (under the kind's locks): a token if the index is up to date, else None."""
        with self._lock:
            seen = self.watch.check(self._seen)
            if seen is not None:
                self._seen = seen
            return seen

    def _own(self, token: Seen | None, count: int, apply: Callable[[], bool]) -> None:
        """After an own write counted as ``count``: ``apply`` it (True: it changed something), if nobody else wrote.

        Nobody did if the count is still the one ``mark`` saw.
        """
        with self._lock:
            if token is None or self._seen is None or self._seen.count != token.count:
                return  # out of date anyway (the count moved): the next question lists
            if apply():
                self.generation += 1
            verify_at_ns = self._seen.verify_at_ns
            self._seen = self.watch.seen(count, self.watch.marker(), listed=False, verify_at_ns=verify_at_ns)


class DirIndex(_Watched, Generic[R, S]):
    """``{stem: Entry}`` for the ``*.json`` files of a hot directory (hidden names skipped); thread-safe.

    ``load(path, raw)`` turns a file into its record or raises; files that
    raise are left out and reported by ``bad()`` until they change or go.
    ``summarize`` makes the record's entry. ``generation`` changes with the
    entries, so callers can cache what they derive from them.
    """

    def __init__(
        self, watch: Watch, writes: threading.RLock, load: Callable[[str, bytes], R], summarize: Callable[[R], S]
    ) -> None:
        super().__init__(watch, writes)
        self._load = load
        self._summarize = summarize
        self._entries: dict[str, Entry[S]] = {}
        self._bad: dict[str, tuple[FileKey, Exception]] = {}
        self.reads = 0  # for tests and the bench: how many files were read

    def current(self) -> tuple[int, Mapping[str, Entry[S]]]:
        """(generation, entries); the mapping is never changed after it is returned."""
        with self._fresh():
            return self.generation, self._entries

    def refresh(self) -> dict[str, R]:
        """Bring the entries up to date; the records a listing read to do it (to spare reading them twice)."""
        loaded: dict[str, R] = {}
        with self._fresh(loaded):
            return loaded

    def bad(self) -> dict[str, tuple[FileKey, Exception]]:
        """Files that could not be loaded at the last listing: {stem: (stat key then, why)}."""
        with self._fresh():
            return dict(self._bad)

    def own(self, token: Seen | None, count: int, changes: Mapping[str, tuple[FileKey, R] | None]) -> None:
        """This process wrote (key, record) or removed (None) these stems, under the lock, counted as ``count``."""

        def apply() -> bool:
            if not changes:
                return False
            entries = dict(self._entries)
            for stem, change in changes.items():
                self._bad.pop(stem, None)
                if change is None:
                    entries.pop(stem, None)
                else:
                    entries[stem] = Entry(change[0], self._summarize(change[1]))
            self._entries = entries
            return True

        self._own(token, count, apply)

    def _list(self, loaded: dict[str, Any] | None) -> None:
        with gc_paused():  # thousands of new acyclic records: the collections they set off were a third of it
            self._list_paused(loaded)

    def _list_paused(self, loaded: dict[str, Any] | None) -> None:
        old, old_bad = self._entries, self._bad
        entries: dict[str, Entry[S]] = {}
        bad: dict[str, tuple[FileKey, Exception]] = {}
        changed = False
        try:
            listing = list(os.scandir(self.watch.directory))
        except FileNotFoundError:
            listing = []
        for item in listing:
            name = item.name
            if name.startswith(".") or not name.endswith(".json"):
                continue
            stem = name[: -len(".json")]
            path = item.path  # a str, as it comes: a Path per file was a tenth of what status took
            previous = old.get(stem)
            try:
                if previous is None and stem not in old_bad:  # new here, so read anyway: stat the open file
                    st, raw = read_stat(path)
                    key = _key(st)
                else:
                    key = _key(item.stat(follow_symlinks=False))
                    if previous is not None and previous.key == key:
                        entries[stem] = previous
                        continue
                    if stem in old_bad and old_bad[stem][0] == key:
                        bad[stem] = old_bad[stem]
                        continue
                    raw = read_bytes(path)
            except FileNotFoundError:
                continue  # removed since listed; any other OSError is the disk's or the process's: raised
            changed = True
            self.reads += 1
            try:
                record = self._load(path, raw)
            except Exception as err:  # noqa: BLE001 - any unusable document is reported, never fatal to the rest
                bad[stem] = (key, err)
                continue
            entries[stem] = Entry(key, self._summarize(record))
            if loaded is not None:
                loaded[stem] = record
        if changed or len(entries) != len(old) or bad.keys() != old_bad.keys():
            self._entries = entries
            self.generation += 1
        self._bad = bad


@dataclass(frozen=True)
class ArchiveNames:
    """An archive's file names (without .json), never changed once handed out.

    Names are ``<prefix>~<stem>``; sorted, the names of one prefix are
    neighbours, so "the stems of a prefix" is a bisection, not a third map.
    """

    by_stem: dict[str, str]  # stem -> name
    ordered: list[str]  # names in order: for runs, creation order

    def with_prefix(self, prefix: str) -> list[str]:
        """The stems of the names starting ``<prefix>~``, in name order."""
        start = prefix + ARCHIVE_SEP
        at = bisect.bisect_left(self.ordered, start)
        stems = []
        while at < len(self.ordered) and self.ordered[at].startswith(start):
            stems.append(self.ordered[at][len(start):])
            at += 1
        return stems


class ArchiveIndex(_Watched):
    """The names in an archive directory, looked up by name alone: no file is read or ``stat``ed."""

    def __init__(self, watch: Watch, writes: threading.RLock) -> None:
        super().__init__(watch, writes)
        self._names = ArchiveNames({}, [])

    def current(self) -> ArchiveNames:
        with self._fresh():
            return self._names

    def own(self, token: Seen | None, count: int, added: list[str], removed: list[str]) -> None:
        """This process archived ``added`` and removed ``removed`` (names), under the lock, counted as ``count``."""

        def apply() -> bool:
            if not added and not removed:
                return False
            by_stem, ordered = dict(self._names.by_stem), list(self._names.ordered)
            for name in removed:
                if (at := bisect.bisect_left(ordered, name)) < len(ordered) and ordered[at] == name:
                    del ordered[at]
                stem = name.rpartition(ARCHIVE_SEP)[2]
                if by_stem.get(stem) == name:  # rare (a set-aside copy): a second copy of the id may remain
                    others = [n for n in ordered if n.rpartition(ARCHIVE_SEP)[2] == stem]
                    if others:
                        by_stem[stem] = others[-1]
                    else:
                        del by_stem[stem]
            for name in added:
                if (at := bisect.bisect_left(ordered, name)) == len(ordered) or ordered[at] != name:
                    ordered.insert(at, name)
                stem = name.rpartition(ARCHIVE_SEP)[2]
                by_stem[stem] = max(name, by_stem.get(stem, name))  # as a listing leaves it: the last in order
            self._names = ArchiveNames(by_stem, ordered)
            return True

        self._own(token, count, apply)

    def _list(self, loaded: dict[str, Any] | None) -> None:
        try:
            names = sorted(
                name[: -len(".json")]
                for name in os.listdir(self.watch.directory)
                if name.endswith(".json") and not name.startswith(".")
            )
        except FileNotFoundError:
            names = []
        if names == self._names.ordered:
            return
        self._names = ArchiveNames({name.rpartition(ARCHIVE_SEP)[2]: name for name in names}, names)
        self.generation += 1
