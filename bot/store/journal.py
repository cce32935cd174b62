"""Webhook deliveries accepted with their votes: one append-only file, one fsync per batch that arrives together.

The webhook must answer GitHub fast and must not lose an answered
delivery, so each one is made durable before its 200. A file (and a
directory fsync) per delivery cost three times what the request itself
cost; here concurrent requests append their lines to ``pending.jsonl``
together and share one ``write`` and one ``fsync`` (group commit): the
first waiting request writes everyone's lines, the others wait for it.

A line is ``{"key", "at", "work"}``. An entry is pending until its
delivery is finished - the store records the finished key in a file of its
own first, so a crash in between leaves an entry that is recognised as done
when the file is read again. When nothing is pending the file is emptied.
A line cut short by a crash was never answered and is dropped; a damaged
complete line is logged, naming the file and line, and skipped.

One process appends (``serve`` holds the state directory); stores opened on
the same directory in that process share one journal (``journal_for``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from loop_engine.atomic import fsync_directory

__all__ = ["DeliveryJournal", "append_after", "journal_for", "line_fields"]

log = logging.getLogger("bot.store.files")

_journals: dict[Path, DeliveryJournal] = {}
_journals_lock = threading.Lock()


def append_after(fd: int, good: int, data: bytes) -> os.stat_result:
    """Append ``data`` durably to the file open as ``fd`` after its first ``good`` bytes (its complete lines).

    Whatever follows them - a line a crash or a failed write cut short - is
    cut off first; and if this write fails, what it wrote is cut off too:
    none of it was acknowledged, so no reader may take any of it.
    """
    try:
        if os.fstat(fd).st_size != good:
            os.ftruncate(fd, good)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return os.fstat(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, good)
        raise


def line_fields(raw: bytes, **fields: type) -> tuple[Any, ...]:
    """The named fields of one JSON line, each of its type; ValueError saying what is wrong otherwise."""
    try:
        entry = orjson.loads(raw)
        values = tuple(entry[name] for name in fields)
    except (orjson.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{type(err).__name__}: {err}") from err
    for (name, kind), value in zip(fields.items(), values, strict=True):
        if not isinstance(value, kind):
            raise ValueError(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
    return values


def journal_for(path: Path, is_done: Callable[[str], bool]) -> DeliveryJournal:
    """The one journal of ``path`` in this process."""
    key = path.resolve()
    with _journals_lock:
        journal = _journals.get(key)
        if journal is None:
            journal = _journals[key] = DeliveryJournal(path, is_done)
        return journal


class DeliveryJournal:
    """``add`` (durable before it returns), ``pending``, ``finish``; safe across threads."""

    def __init__(self, path: Path, is_done: Callable[[str], bool]) -> None:
        self.path = path
        self._is_done = is_done
        self._cond = threading.Condition()
        self._loaded = False
        self._seen: tuple[int, int] | None = None  # the file as this process last read or wrote it
        self._good = 0  # its length up to the last complete line
        self._keys: set[str] = set()  # every key in the file, finished or not
        self._pending: dict[str, list[dict[str, Any]]] = {}  # key -> work, in the order they came
        self._batch: list[tuple[str, bytes]] = []
        self._batch_no = 1  # the batch now collecting lines
        self._written_no = 0  # every batch up to this one is written (or failed)
        self._failed: dict[int, OSError] = {}
        self._writing = False
        self._fd: int | None = None

    def has(self, key: str) -> bool:
        with self._cond:
            self._load()
            return key in self._keys

    def add(self, key: str, at: str, work: list[dict[str, Any]]) -> bool:
        """Append the delivery durably; False, writing nothing, when ``key`` is in the journal already."""
        line = orjson.dumps({"key": key, "at": at, "work": work}) + b"\n"
        with self._cond:
            self._load()
            if key in self._keys:
                return False
            self._keys.add(key)
            self._pending[key] = work
            self._batch.append((key, line))
            mine = self._batch_no
            while self._written_no < mine:
                if self._writing:
                    self._cond.wait()
                    continue
                lines, number = self._batch, self._batch_no
                self._batch, self._batch_no, self._writing = [], number + 1, True
                self._cond.release()
                try:
                    error = self._write(b"".join(line for _key, line in lines))
                finally:
                    self._cond.acquire()
                self._writing, self._written_no = False, number
                if error is not None:
                    self._failed[number] = error
                    self._failed.pop(number - 100, None)
                    for lost, _line in lines:
                        self._keys.discard(lost)
                        self._pending.pop(lost, None)
                self._cond.notify_all()
            if mine in self._failed:
                raise self._failed[mine]
            return True

    def pending(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """(key, work) of every entry not finished, oldest first."""
        with self._cond:
            self._load()
            for key in [key for key in self._pending if self._is_done(key)]:  # finished just before a crash
                del self._pending[key]
            return list(self._pending.items())

    def finish(self, key: str) -> None:
        """Forget a finished entry (its done record exists); the file is emptied once nothing is pending."""
        with self._cond:
            self._load()
            self._pending.pop(key, None)
            if self._pending or self._batch or self._writing or self._fd is None:
                return
            os.ftruncate(self._fd, 0)
            os.fsync(self._fd)
            self._keys.clear()
            self._seen, self._good = self._identity(), 0

    # -- the file -------------------------------------------------------------------

    def _write(self, data: bytes) -> OSError | None:
        try:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
                fsync_directory(self.path.parent)
            found = append_after(self._fd, self._good, data)
            self._seen, self._good = (found.st_ino, found.st_size), found.st_size
        except OSError as err:
            log.error("%s: could not record accepted deliveries (%s); their senders get an error", self.path, err)
            return err
        return None

    def _identity(self) -> tuple[int, int] | None:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return None
        return found.st_ino, found.st_size

    def _load(self) -> None:
        """Read the file when another process changed it since (the caller holds the lock).

        Only ``serve`` appends, but ``export`` or a test reads it from another
        process - so reading changes nothing; a line a crash cut short is
        ignored here and cut off by the next append (``_write``).
        """
        if self._writing or self._batch:  # our own lines are on their way: nobody else writes meanwhile
            return
        identity = self._identity()
        if self._loaded and identity == self._seen:
            return
        self._keys.clear()
        self._pending.clear()
        self._loaded, self._seen = True, identity
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if identity is None:  # made by the first add: a look-up creates nothing
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        data = self.path.read_bytes()
        # a last line cut short was never acknowledged, so never counted; the next append cuts it off
        self._good = data.rfind(b"\n") + 1
        for number, raw in enumerate(data[: self._good].splitlines(), start=1):
            try:
                key, work = line_fields(raw, key=str, work=list)
            except ValueError as err:
                log.error("%s line %d: damaged accepted delivery (%s), skipped; the others go on",
                          self.path, number, err)
                continue
            self._keys.add(key)
            self._pending[key] = work
