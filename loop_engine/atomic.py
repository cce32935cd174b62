"""The one crash-safe way to write a file.

A reader - or a process restarted after kill -9 - sees either the old
content or the new, never a torn file: the bytes go to a temp file in the
target's directory, are fsynced, renamed over the target, and the directory
is fsynced so the rename itself survives a power loss.

No write follows a symlink: the temp file is created with O_EXCL (which
never follows one), a target that is a symlink is refused rather than
silently replaced, and ``read_text_no_follow`` reads files that a hostile
state dir could have swapped for a link to someone else's file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import time
from pathlib import Path

__all__ = [
    "SymlinkRefusedError",
    "atomic_write_bytes",
    "atomic_write_text",
    "fsync_directory",
    "make_directories",
    "read_text_no_follow",
    "remove_stale_temp_files",
]

#: Temp files are named ``.<target name>.<random>.tmp`` next to their target.
_TEMP_SUFFIX = ".tmp"


class SymlinkRefusedError(OSError):
    """A file the bot writes or reads is a symlink (or not a regular file); the message names it.

    An ``OSError`` so that every caller that already reports a failed write
    (disk full, permission denied) reports this one the same way.
    """

    def __init__(self, path: str | os.PathLike[str], what: str = "is a symlink") -> None:
        super().__init__(
            errno.ELOOP,
            f"{what}; loopbot never writes or reads through one - remove it (the bot recreates the file)",
            os.fspath(path),
        )


def fsync_directory(directory: Path) -> None:
    """Make a rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> Path:
    """Replace ``path`` with ``data`` atomically; with ``durable`` also survive power loss.

    A symlink at ``path`` is refused (``SymlinkRefusedError``): the rename
    would replace the link, not its target, but a link there means someone
    meant the bot to write elsewhere, and silently undoing it hides that.
    """
    target = Path(path)
    if target.is_symlink():
        raise SymlinkRefusedError(target)
    if not target.parent.is_dir():
        make_directories(target.parent, durable=durable)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=_TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    if durable:
        fsync_directory(target.parent)
    return target


def make_directories(directory: Path, *, durable: bool) -> None:
    """``mkdir -p``; durable, each new directory's entry is fsynced into its parent,
    so a file renamed into it cannot vanish with the directory after a power loss."""
    missing = [d for d in (directory, *directory.parents) if not d.exists()]
    for new in reversed(missing):
        new.mkdir(exist_ok=True)
        if durable:
            fsync_directory(new.parent)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> Path:
    """``atomic_write_bytes`` for text, always UTF-8 whatever the locale."""
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def read_text_no_follow(path: str | os.PathLike[str]) -> str:
    """The UTF-8 text of the regular file ``path``, refusing a symlink or a FIFO/device there.

    ``FileNotFoundError`` passes through for callers that treat a missing
    file as empty; a symlink or special file raises ``SymlinkRefusedError``.
    O_NONBLOCK keeps a FIFO planted at the path from hanging the open.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise SymlinkRefusedError(path) from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise SymlinkRefusedError(path, "is not a regular file")
        return handle.read().decode("utf-8")


def remove_stale_temp_files(
    root: str | os.PathLike[str], *, older_than: float = 60.0, now: float | None = None
) -> list[Path]:
    """Delete the temp files that writers killed between write and rename left under ``root``.

    A live writer holds its temp file for milliseconds, so one last modified
    more than ``older_than`` seconds before ``now`` (epoch seconds; default
    the current time) belongs to a dead process. Only names this module
    creates are touched; the targets themselves never are. Returns what was removed.
    """
    cutoff = (time.time() if now is None else now) - older_than
    removed = []
    for path in sorted(Path(root).rglob(f".*{_TEMP_SUFFIX}")):
        with contextlib.suppress(FileNotFoundError):
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
    return removed
