"""One ``serve`` per state dir: an exclusive flock on ``state_dir/serve.lock``.

Not part of the store: it holds no data (the database does its own locking);
it decides which process serves a state dir, which is why the SQLite store
needs no leases.

The kernel holds the lock exactly as long as the holder's descriptor is open,
so a holder killed with kill -9 frees it at once: no stale pid files. The
file's content (pid, role, port, start time) only tells others *who* holds it;
``holder()`` probes the flock itself, never trusts the file. The CLI needs the
``role``: a ``serve`` reads the inbox and applies decisions, a foreground
``run`` does neither.

The info is rewritten in place, never via rename (a rename would put a new,
unlocked file at the path), and the file is opened with O_NOFOLLOW: a
``serve.lock`` symlinked outside the state dir must not make the bot
truncate the file it points to.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from bot.store.base import StoreError

__all__ = [
    "AlreadyRunningError", "LockFileError", "ServeLock", "LOCK_NAME", "ROLE_SERVE", "ROLE_RUN", "role_of",
]

LOCK_NAME = "serve.lock"
_PROBE_RETRIES = 5
_PROBE_WAIT = 0.01
#: Who holds the lock: a server (takes run requests, applies decisions) or a foreground `loopbot run`.
ROLE_SERVE = "serve"
ROLE_RUN = "run"


def role_of(info: dict[str, Any]) -> str:
    """The holder's role; lock files from before roles existed count as ``serve``.

    Such a file is only read while its (older) writer is still alive, and the
    long-lived holder across an upgrade is a server, not a minute-long run.
    """
    return str(info.get("role") or ROLE_SERVE)


def _alive(pid: object) -> bool:
    """Whether ``pid`` names a running process (a stale pid in the file says nothing)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class AlreadyRunningError(RuntimeError):
    """Another live process holds the serve lock; the message names its pid and role."""

    def __init__(self, path: Path, info: dict[str, Any]) -> None:
        self.path = path
        self.info = info
        self.pid = info.get("pid")
        self.role = role_of(info)
        started = f", started {info['started_at']}" if info.get("started_at") else ""
        if self.role == ROLE_RUN:
            message = (
                f"a foreground `loopbot run` (pid {self.pid}{started}) is using {path.parent}; "
                "wait for it to finish, or start `loopbot serve` afterwards so runs are handed to it"
            )
        else:
            port = f", port {info['port']}" if info.get("port") is not None else ""
            message = (
                f"another loopbot serve (pid {self.pid}{port}{started}) holds {path}; "
                "stop it first, or give this one its own state_dir"
            )
        super().__init__(message)


class LockFileError(StoreError):
    """The lock file is a symlink or not a regular file; the message names it and the fix."""


def _open_lock(path: Path, flags: int) -> int:
    """``os.open`` for the lock file, refusing a symlink or a special file (a FIFO must not hang us)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise LockFileError(
                f"{path} is a symlink; loopbot never writes through one: remove it (the bot recreates it)"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockFileError(f"{path} is not a regular file: remove it (the bot recreates it)")
    return fd


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _read_info(fd: int) -> dict[str, Any]:
    """The holder's info; a torn or empty file (holder mid-write) reads as {}."""
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 64 * 1024)
    try:
        info = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


class ServeLock:
    """``acquire()`` once per process; the lock lasts until ``release()`` or process exit."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / LOCK_NAME
        self._fd: int | None = None
        self._taken: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))
        self.info: dict[str, Any] = {}

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, *, role: str = ROLE_SERVE, port: int | None = None) -> dict[str, Any]:
        """Take the lock as ``role`` or raise AlreadyRunningError naming the holder's pid and role."""
        if self._fd is not None:
            return self.info
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_lock(self.path, os.O_RDWR | os.O_CREAT)
        for attempt in range(_PROBE_RETRIES + 1):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                info = _read_info(fd)
                if attempt < _PROBE_RETRIES and not _alive(info.get("pid")):
                    # Likely a holder() probe (a shared lock held for microseconds), not a server.
                    time.sleep(_PROBE_WAIT)
                    continue
                os.close(fd)
                raise AlreadyRunningError(self.path, info) from None
        self._fd = fd
        self._taken = (_identity(os.fstat(fd)), _identity(os.stat(self.path.parent)))
        self.info = {"pid": os.getpid(), "role": role, "port": port, "started_at": datetime.now(UTC).isoformat()}
        self._write_info()
        return self.info

    def lost(self) -> str | None:
        """What changed since ``acquire()``, when the lock or its state dir is no longer the one taken.

        A state dir deleted or replaced under a holder leaves it holding a lock
        nobody else can see: another ``serve`` or ``run`` would start on the new
        directory beside it and reuse ids already posted. Two ``stat`` calls.
        """
        if self._fd is None:
            return None
        lock_taken, dir_taken = self._taken
        state_dir = self.path.parent
        try:
            now_dir = _identity(os.stat(state_dir))
        except FileNotFoundError:
            return f"state_dir {state_dir} was removed"
        if now_dir != dir_taken:
            return f"state_dir {state_dir} was replaced by another directory"
        try:
            now_lock = _identity(os.lstat(self.path))
        except FileNotFoundError:
            return f"the lock file {self.path} was removed"
        if now_lock != lock_taken:
            return f"the lock file {self.path} was replaced by another file"
        return None

    def update(self, **info: Any) -> None:
        """Add to the holder's info (e.g. the port uvicorn bound when asked for port 0)."""
        if self._fd is None:
            raise RuntimeError("update() needs the lock: call acquire() first")
        self.info.update(info)
        self._write_info()

    def _write_info(self) -> None:
        assert self._fd is not None
        data = json.dumps(self.info).encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    def release(self) -> None:
        """Give the lock up (closing the descriptor drops the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ServeLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @staticmethod
    def holder(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The live holder's info ({"pid", "role", "port", "started_at"}), or None if nobody holds it.

        Files written before roles existed have no "role": read it with ``role_of``.
        """
        path = Path(state_dir) / LOCK_NAME
        try:
            fd = _open_lock(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_info(fd)
            return None  # we could lock it, so no live process holds it
        finally:
            os.close(fd)
