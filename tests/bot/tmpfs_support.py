"""A small tmpfs mounted by the test (as root): a real full disk and a real read-only file system.

Without root (or without the mount capability) a test that needs one is
skipped on a developer's machine, and fails under ``CI=true``: there the
check must run, not vanish.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill", "read_only", "tmpfs"]


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        message = f"cannot mount {' '.join(args)} (the test needs root): {done.stderr.strip() or done.returncode}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """``path`` (made if missing) with a tmpfs of ``size`` mounted on it for the block's duration."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30, check=False)


def fill(mount: Path) -> Path:
    """Write a file until the disk refuses even one more byte (ENOSPC); delete it to free the disk."""
    filler = mount / "filler.bin"
    with open(filler, "wb", buffering=0) as out:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    written = out.write(block)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
                if not written:
                    break
    assert os.statvfs(mount).f_bfree == 0, "the filler left space"
    return filler


def read_only(mount: Path) -> None:
    """Remount the tmpfs at ``mount`` read-only (it stays so until unmounted)."""
    _mount("-o", "remount,ro", str(mount))
