"""Which records does an update not need to read again? The ones this process wrote last, while nobody else wrote.

An update reads its record under the kind's lock, so that it changes what
is on disk and not what some process remembers. For the vote path that
read was half the cost of a vote, and it grows with the review's audit
trail: the same bytes this process wrote a moment before, parsed again.
``RecentWrites`` keeps the records this process's updates wrote and hands
one back when three things say the file still holds it: the kind's write
count has not moved since this process's last write (no other process
wrote the kind), the file's stat key is the one the write left (no hand
edit), and no other write of this process touched that file since.

A record handed out is taken out: the update mutates it, and puts it back
only once its write succeeded. ``peek`` leaves it in place, for a reader
that only looks (and checks again under the lock). All methods are called
under this process's write lock of the kind.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from .index import FileKey

__all__ = ["RecentWrites"]

R = TypeVar("R")


class RecentWrites(Generic[R]):
    """Up to ``size`` records by stem, each with the stat key its write left."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._records: OrderedDict[str, tuple[FileKey, R]] = OrderedDict()
        self._count: int | None = None  # the kind's write count after this process's last write

    def begin(self, count: int) -> None:
        """A write starts and the kind has been written ``count`` times: forget all if another process wrote."""
        if count != self._count:
            self._records.clear()

    def end(self, count: int | None) -> None:
        """The write was counted as ``count``; None: it failed half-way, so nothing kept is trusted."""
        if count is None:
            self._records.clear()
        self._count = count

    def take(self, stem: str, key: FileKey | None) -> R | None:
        """The record last written as ``stem`` if its file still has ``key``; it is no longer kept either way."""
        kept = self._records.pop(stem, None)
        if kept is None or key is None or kept[0] != key:
            return None
        return kept[1]

    def peek(self, stem: str, key: FileKey | None, count: int) -> R | None:
        """The record kept for ``stem``, left in place, if the kind was last written by this process (``count``)."""
        kept = self._records.get(stem)
        if kept is None or key is None or kept[0] != key or count != self._count:
            return None
        return kept[1]

    def keep(self, stem: str, key: FileKey | None, record: R) -> None:
        if key is None:
            return
        self._records[stem] = (key, record)
        self._records.move_to_end(stem)
        while len(self._records) > self.size:
            self._records.popitem(last=False)

    def forget(self, stem: str) -> None:
        self._records.pop(stem, None)
