"""Where do counted votes go before their review is rewritten? ``reviews/votes.jsonl``, one fsync per batch.

Rewriting a review's document for every vote cost a file, a rename and two
fsyncs per review per batch: the kernel's share of that, not Python's, was
what capped Slack's votes per second. A vote that is counted and changes
nothing else (no outcome, no pause) only appends to its review's audit
trail, so it is appended here instead: the votes of a whole batch, of every
review, in one write and one fsync, under the reviews' lock.

A review is its document plus its lines here, folded in order
(``Collection`` does it wherever it reads a hot review). Folding is
idempotent - a vote whose delivery key the document has is skipped - so a
document written with its votes folded in may leave them here: every
writer of a review reads it folded first, under the lock, so a document
always holds a prefix of its review's lines. When the file holds
``COMPACT_AT`` lines the writer folds the reviews with the most lines into
their documents, a few per batch (``FOLD_AT_ONCE``: rewriting every
document at once held one batch of votes up for tens of milliseconds), and
starts a new file without their lines (``drop``); a crash in between
leaves lines that fold to nothing.

The first line names the file's generation, so a reader that kept an
offset into an older file (same inode number, recycled) reads afresh. A
line cut short by a crash was never acknowledged and is dropped; a damaged
complete line is logged naming the file and line, and skipped.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from loop_engine.atomic import atomic_write_bytes

from .journal import append_after, line_fields

__all__ = ["COMPACT_AT", "FOLD_AT_ONCE", "VoteJournal"]

log = logging.getLogger("bot.store.files")

#: Lines after which the writer folds reviews into their documents and starts a new file without their lines.
COMPACT_AT = 2000
#: Reviews folded into their documents by one batch, the ones with the most lines first.
FOLD_AT_ONCE = 2


class VoteJournal:
    """The lines of ``path`` by review stem, as of the last ``refresh``; appends under the kind's lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._identity: tuple[int, int] | None = None  # (inode, size) as last read or written
        self._generation = b""
        self._offset = 0  # up to the last complete line read
        self._lines: dict[str, list[dict[str, Any]]] = {}
        self._count = 0
        self._line_no = 1  # of the last line read; the first is the header

    def __len__(self) -> int:
        return self._count

    def refresh(self) -> None:
        """Read what was appended since (by any process); a stat when nothing was."""
        with self._lock:
            try:
                found = os.stat(self.path)
            except FileNotFoundError:
                self._reset(None, b"")
                return
            if (found.st_ino, found.st_size) == self._identity:
                return
            with open(self.path, "rb") as handle:
                header = handle.readline()
                if not header.endswith(b"\n"):  # cut short while being made: an empty journal
                    self._reset(None, b"")
                    return
                if header != self._generation:  # another file than the one read so far
                    self._reset(None, header)
                    self._offset = len(header)
                handle.seek(self._offset)
                data = handle.read(max(found.st_size - self._offset, 0))
            complete = data.rfind(b"\n") + 1  # a last line cut short: never acknowledged, never counted
            self._take(data[:complete])
            self._offset += complete
            self._identity = (found.st_ino, self._offset)

    def lines(self, stem: str) -> list[dict[str, Any]]:
        """The votes (as stored) appended for review ``stem``, oldest first, as of the last refresh."""
        return self._lines.get(stem, [])

    def stems(self) -> list[str]:
        return list(self._lines)

    def append(self, entries: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append (stem, vote) lines durably; the caller holds the kind's lock and has refreshed."""
        data = b"".join(orjson.dumps({"review": stem, "vote": vote}) + b"\n" for stem, vote in entries)
        with self._lock:
            if not self._generation:
                self._start()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
            try:
                found = append_after(fd, self._offset, data)
            finally:
                os.close(fd)
            for stem, vote in entries:  # as written: no need to parse them back
                self._lines.setdefault(stem, []).append(vote)
            self._count += len(entries)
            self._line_no += len(entries)
            self._offset = found.st_size
            self._identity = (found.st_ino, found.st_size)

    def drop(self, stems: Iterable[str]) -> None:
        """Start a new file without the lines of ``stems``; the caller holds the kind's lock and folded them."""
        with self._lock:
            gone = set(stems)
            self._start({stem: lines for stem, lines in self._lines.items() if stem not in gone})

    def _start(self, keep: dict[str, list[dict[str, Any]]] | None = None) -> None:
        header = orjson.dumps({"votes_journal": secrets.token_hex(8)}) + b"\n"
        kept = b"".join(orjson.dumps({"review": stem, "vote": vote}) + b"\n"
                        for stem, votes in (keep or {}).items() for vote in votes)
        atomic_write_bytes(self.path, header + kept)
        found = os.stat(self.path)
        self._reset((found.st_ino, found.st_size), header)
        self._lines = keep or {}
        self._count = self._line_no = sum(len(votes) for votes in self._lines.values())
        self._line_no += 1
        self._offset = found.st_size

    def _reset(self, identity: tuple[int, int] | None, generation: bytes) -> None:
        self._identity, self._generation, self._offset = identity, generation, 0
        self._lines, self._count, self._line_no = {}, 0, 1

    def _take(self, data: bytes) -> None:
        for raw in data.splitlines():
            self._line_no += 1
            try:
                stem, vote = line_fields(raw, review=str, vote=dict)
            except ValueError as err:
                log.error("%s line %d: damaged vote line (%s), skipped; the others go on",
                          self.path, self._line_no, err)
                continue
            self._lines.setdefault(stem, []).append(vote)
            self._count += 1
