"""An in-process index of one directory of documents, refreshed only when the directory changed.

Why: the serve tick, /healthz and ``status`` ask the same questions every
half second (what is open, what is due, how many of each); reading every
document each time made an idle bot's cost grow with the reviews ever
stored. The index answers from memory and costs one ``stat`` of the
directory per question while nothing changes.

How it notices change, including writes by other processes (``loopbot
decide`` runs apart from ``serve``): every document write is an atomic
rename into the directory, which updates the directory's ``st_mtime_ns``.
A scan lists the names, ``stat``s each and re-reads only the files whose
(inode, mtime, size) changed. Kernel timestamps are coarse (a write in the
same clock tick as a scan leaves the mtime as it was), so an unchanged mtime
is trusted only when it was already ``settle`` seconds old at the last scan;
a younger one means "scan again" - a cost paid only while writes happen.
File systems that keep whole-second timestamps need two seconds of that;
the ones with sub-second timestamps (every mtime not a whole second tells
them apart) need only the kernel's tick, so a busy bot rescans for 50 ms
after a write instead of two seconds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["DirIndex", "Entry", "SETTLE_SECONDS", "FINE_SETTLE_SECONDS"]

S = TypeVar("S")

#: How old a directory mtime must be before an unchanged one is trusted, on a file system that keeps
#: whole seconds (ext3, HFS+, some network file systems: a write within the same second keeps the mtime).
SETTLE_SECONDS = 2.0
#: ... and on one with sub-second timestamps (ext4, xfs, btrfs, tmpfs): their clock is the kernel's coarse
#: one, which lags the wall clock by at most a tick (1-10 ms), so a write after a scan that began this long
#: after the mtime always moves it.
FINE_SETTLE_SECONDS = 0.05

_Key = tuple[int, int, int]


@dataclass(frozen=True)
class Entry(Generic[S]):
    """One indexed file: its stat key, what ``load`` made of it, and its bytes (to rebuild records)."""

    key: _Key
    summary: S
    raw: bytes


class DirIndex(Generic[S]):
    """``{stem: Entry}`` for the ``*.json`` files of ``directory`` (hidden names skipped); thread-safe.

    ``load(path, raw)`` turns a file into its summary or raises; files that
    raise are left out and reported by ``bad()`` until they change or go.
    With ``load=None`` only names are kept (no stat, no read): enough for
    an archive looked up by name.
    ``generation`` changes with the entries, so callers can cache what they
    derive from them and a question asked every tick costs nothing while
    nothing changes.
    """

    def __init__(
        self,
        directory: Path,
        load: Callable[[Path, bytes], S] | None,
        *,
        wall: Callable[[], float] = time.time,
        settle: float = SETTLE_SECONDS,
    ) -> None:
        self.directory = directory
        self._load = load
        self._wall = wall
        self._settle_ns = int(settle * 1e9)
        self._fine_settle_ns = min(self._settle_ns, int(FINE_SETTLE_SECONDS * 1e9))
        self._lock = threading.Lock()
        self._entries: dict[str, Entry[S]] = {}
        self._bad: dict[str, tuple[_Key, Exception]] = {}
        self._trusted: tuple[int, int] | None = None  # (dir inode, dir mtime) known to be fully scanned
        self.generation = 0  # bumped whenever the entries change: callers cache what they derive by it
        self.scans = 0  # for tests and the bench: how often the directory was listed
        self.reads = 0  # ... and how many files were read

    def current(self) -> tuple[int, Mapping[str, Entry[S]]]:
        """(generation, entries); the mapping is never changed after it is returned."""
        with self._lock:
            self._refresh()
            return self.generation, self._entries

    def bad(self) -> dict[str, tuple[_Key, Exception]]:
        """Files that could not be loaded at the last scan: {stem: (stat key then, why)}."""
        with self._lock:
            self._refresh()
            return dict(self._bad)

    def forget(self) -> None:
        """Scan again at the next question (after a write this process made and wants seen at once)."""
        with self._lock:
            self._trusted = None

    def _refresh(self) -> None:
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            if self._entries or self._bad:
                self._entries, self._bad = {}, {}
                self.generation += 1
            self._trusted = None
            return
        marker = (st.st_ino, st.st_mtime_ns)
        if marker == self._trusted:
            return
        now_ns = int(self._wall() * 1e9)
        self._scan()
        whole_seconds = st.st_mtime_ns % 1_000_000_000 == 0
        settle = self._settle_ns if whole_seconds else self._fine_settle_ns
        self._trusted = marker if now_ns - st.st_mtime_ns >= settle else None

    def _scan(self) -> None:
        self.scans += 1
        old, old_bad = self._entries, self._bad
        entries: dict[str, Entry[S]] = {}
        bad: dict[str, tuple[_Key, Exception]] = {}
        changed = False
        try:
            listing = list(os.scandir(self.directory))
        except FileNotFoundError:
            listing = []
        for item in listing:
            name = item.name
            if name.startswith(".") or not name.endswith(".json"):
                continue
            stem = name[: -len(".json")]
            if self._load is None:
                entries[stem] = old.get(stem) or Entry((0, 0, 0), None, b"")  # type: ignore[arg-type]
                changed = changed or stem not in old
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed since listed
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            previous = old.get(stem)
            if previous is not None and previous.key == key:
                entries[stem] = previous
                continue
            if stem in old_bad and old_bad[stem][0] == key:
                bad[stem] = old_bad[stem]
                continue
            changed = True
            path = Path(item.path)
            try:
                self.reads += 1
                raw = path.read_bytes()
                entries[stem] = Entry(key, self._load(path, raw), raw)
            except FileNotFoundError:
                continue
            except OSError:
                raise  # the disk or the process (EMFILE, EACCES), not the document: never quarantine for it
            except Exception as err:  # noqa: BLE001 - any unusable document is reported, never fatal to the rest
                bad[stem] = (key, err)
        if changed or len(entries) != len(old) or bad.keys() != old_bad.keys():
            self._entries = entries
            self.generation += 1
        self._bad = bad
