"""The one crash-safe way to write a file.

A reader - or a process restarted after kill -9 - sees either the old
content or the new, never a torn file: the bytes go to a temp file in the
target's directory, are fsynced, renamed over the target, and the directory
is fsynced so the rename itself survives a power loss.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "fsync_directory", "make_directories", "remove_stale_temp_files"]

#: Temp files are named ``.<target name>.<random>.tmp`` next to their target.
_TEMP_SUFFIX = ".tmp"


def fsync_directory(directory: Path) -> None:
    """Make a rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> Path:
    """Replace ``path`` with ``data`` atomically; with ``durable`` also survive power loss."""
    target = Path(path)
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
