"""A symlinked serve.lock never makes the bot truncate the file it points to (issue #12 item 3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.store import StoreError
from bot.serve_lock import LOCK_NAME, LockFileError, ServeLock


def planted_link(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside.txt"
    outside.write_text("someone else's data\n", encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    (state / LOCK_NAME).symlink_to(outside)
    return state, outside


def test_acquire_refuses_a_symlinked_lock_and_leaves_its_target_alone(tmp_path: Path) -> None:
    state, outside = planted_link(tmp_path)
    lock = ServeLock(state)
    with pytest.raises(LockFileError) as caught:
        lock.acquire()
    assert isinstance(caught.value, StoreError)  # the CLI reports store errors with exit 1
    assert str(state / LOCK_NAME) in str(caught.value) and "symlink" in str(caught.value)
    assert outside.read_text(encoding="utf-8") == "someone else's data\n"
    assert not lock.held


def test_holder_refuses_a_symlinked_lock(tmp_path: Path) -> None:
    state, _ = planted_link(tmp_path)
    with pytest.raises(LockFileError, match="symlink"):
        ServeLock.holder(state)


def test_a_fifo_at_the_lock_path_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / LOCK_NAME)
    with pytest.raises(LockFileError, match="not a regular file"):
        ServeLock(tmp_path).acquire()
    with pytest.raises(LockFileError, match="not a regular file"):
        ServeLock.holder(tmp_path)


def test_a_plain_lock_file_still_works(tmp_path: Path) -> None:
    lock = ServeLock(tmp_path)
    info = lock.acquire(port=8123)
    try:
        assert ServeLock.holder(tmp_path) == info
    finally:
        lock.release()
    assert ServeLock.holder(tmp_path) is None
