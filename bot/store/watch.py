"""When an index must list its directory again, and when this process's own write can stand in for that.

Why: an index that lists 10,000 files after every write made a vote wait
for listings of the directory it had just written to. A process that writes
a document knows what it wrote; it needs to list only when someone else
may have written too.

Two signals say "someone else wrote":

- The directory's mtime, moved by every rename into it and unlink from it,
  whoever does it - even a person moving files by hand. But kernel
  timestamps are coarse: a write in the same clock tick as a look leaves
  the mtime as it was, so a young mtime cannot promise "nothing since".
- The write count of the kind, kept in its lock file (``<kind>/.lock``):
  every store writer bumps it after its writes, under the lock it already
  holds for them (``Collection.writing``). A count that moved says
  "changed" even when the mtime did not. It is a hint for live processes,
  not a document: a restarted process lists everything anyway.

So a directory is listed again when its mtime moved; when the count moved
and the mtime seen last was young (a write may hide behind it); and once
more when a young mtime that a first listing saw, or that moved with no
write counted (a writer that takes no lock), has aged past the settle
time: that writer may have written again in the same tick. A process's own
write, made under the lock while its index was up to date, updates the
index instead (``Seen`` after the write, with the new count): no listing.
Left unseen until the directory changes again: a writer killed between its
rename and its count within the clock tick of this process's last write.

Settle time: file systems that keep whole-second timestamps need two
seconds; the ones with sub-second timestamps (an mtime that is not a whole
second tells them apart) need only the kernel's coarse tick, 50 ms.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SETTLE_SECONDS", "FINE_SETTLE_SECONDS", "Seen", "Watch", "bump_count", "count_in", "read_count"]

#: How old a directory mtime must be before an unchanged one is trusted, on a file system that keeps
#: whole seconds (ext3, HFS+, some network file systems: a write within the same second keeps the mtime).
SETTLE_SECONDS = 2.0
#: ... and on one with sub-second timestamps (ext4, xfs, btrfs, tmpfs): their clock is the kernel's coarse
#: one, which lags the wall clock by at most a tick (1-10 ms), so a write after a look that began this long
#: after the mtime always moves it.
FINE_SETTLE_SECONDS = 0.05

_COUNT = struct.Struct("<Q")
Marker = tuple[int, int] | None  # (directory inode, mtime in ns); None: no directory


def read_count(lock_file: Path) -> int:
    """The kind's write count (0 while nobody has counted, or the lock file cannot be read)."""
    try:
        fd = os.open(lock_file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # none yet, or a planted link: writes refuse that one loudly (documents.locked)
        return 0
    try:
        data = os.pread(fd, _COUNT.size, 0)
    finally:
        os.close(fd)
    return _COUNT.unpack(data)[0] if len(data) == _COUNT.size else 0


def count_in(fd: int) -> int:
    """The write count in the lock file open as ``fd``."""
    data = os.pread(fd, _COUNT.size, 0)
    return _COUNT.unpack(data)[0] if len(data) == _COUNT.size else 0


def bump_count(fd: int) -> int:
    """Count one more write in the lock file open as ``fd`` (the caller holds its lock); the new count."""
    count = count_in(fd) + 1
    os.pwrite(fd, _COUNT.pack(count), 0)
    return count


@dataclass(frozen=True)
class Seen:
    """What an index knows it reflects: the directory as of ``marker`` and every write counted up to ``count``."""

    marker: Marker
    count: int
    young: bool  # the mtime was not settle-old when seen: a write in the same tick may hide behind it
    verify_at_ns: int | None = None  # a listing saw it young: list once more when it has settled


class Watch:
    """The signals of one directory: its mtime and its kind's write count (in ``lock_file``)."""

    def __init__(self, directory: Path, lock_file: Path, *, wall: Callable[[], float], settle: float) -> None:
        self.directory = directory
        self._lock_file = lock_file
        self._wall = wall
        self._settle_ns = int(settle * 1e9)
        self._fine_settle_ns = min(self._settle_ns, int(FINE_SETTLE_SECONDS * 1e9))

    def marker(self) -> Marker:
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns

    def count(self) -> int:
        return read_count(self._lock_file)

    def check(self, seen: Seen | None) -> Seen | None:
        """``seen`` (or it with a newer count) if it still holds, None if the directory must be listed.

        The count is read before the mtime: a writer renames, then counts,
        so a count that moved comes with the mtime its rename left.
        """
        if seen is None:
            return None
        count = self.count()
        marker = self.marker()
        if marker != seen.marker:
            return None
        if count != seen.count:
            # an old mtime that did not move: the writes counted were in the kind's other directory
            return None if seen.young else Seen(marker, count, False, seen.verify_at_ns)
        if seen.verify_at_ns is not None and self._now_ns() >= seen.verify_at_ns:
            return None
        return seen

    def seen(self, count: int, marker: Marker, *, listed: bool, verify_at_ns: int | None = None) -> Seen:
        """What is known after a listing that began at (``count``, ``marker``), or after an own write."""
        if marker is None:
            return Seen(None, count, False, verify_at_ns)
        mtime = marker[1]
        settle = self._settle_ns if mtime % 1_000_000_000 == 0 else self._fine_settle_ns
        young = self._now_ns() - mtime < settle
        if young and listed:
            verify_at_ns = mtime + settle
        return Seen(marker, count, young, verify_at_ns)

    def _now_ns(self) -> int:
        return int(self._wall() * 1e9)
