"""A serve whose state dir is deleted or replaced under it stops instead of sharing it (issue #22 item 4)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from bot.service import Service
from bot.serve_lock import LOCK_NAME, ServeLock


def held(tmp_path: Path) -> tuple[ServeLock, Path]:
    state = tmp_path / "state"
    lock = ServeLock(state)
    lock.acquire()
    return lock, state


def test_a_lock_still_in_place_is_not_lost(tmp_path: Path) -> None:
    lock, _ = held(tmp_path)
    assert lock.lost() is None
    lock.update(port=1234)  # rewriting the info in place keeps the same file
    assert lock.lost() is None


def test_a_removed_state_dir_is_named(tmp_path: Path) -> None:
    lock, state = held(tmp_path)
    shutil.rmtree(state)
    assert lock.lost() == f"state_dir {state} was removed"


def test_a_replaced_state_dir_is_named_even_with_a_lock_file_in_it(tmp_path: Path) -> None:
    lock, state = held(tmp_path)
    state.rename(tmp_path / "moved")
    state.mkdir()
    (state / LOCK_NAME).write_text("{}", encoding="utf-8")
    assert lock.lost() == f"state_dir {state} was replaced by another directory"


def test_a_removed_or_replaced_lock_file_is_named(tmp_path: Path) -> None:
    lock, state = held(tmp_path)
    (state / LOCK_NAME).unlink()
    assert lock.lost() == f"the lock file {state / LOCK_NAME} was removed"
    (state / LOCK_NAME).write_text("{}", encoding="utf-8")
    assert lock.lost() == f"the lock file {state / LOCK_NAME} was replaced by another file"


def test_a_released_lock_has_nothing_to_lose(tmp_path: Path) -> None:
    lock, state = held(tmp_path)
    lock.release()
    shutil.rmtree(state)
    assert lock.lost() is None


class _NoRuns:
    def problem(self) -> None:
        return None

    def apply_decided(self, review_id: str) -> None:
        raise AssertionError(f"no tick should run on a lost state dir, yet review {review_id} was applied")


def test_the_tick_stops_once_with_one_error_when_the_state_dir_goes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lock, state = held(tmp_path)
    calls: list[str] = []
    service = Service(None, _NoRuns(), lost=lock.lost, on_lost=calls.append)  # type: ignore[arg-type]
    assert service.held_gone() is False and calls == []
    shutil.rmtree(state)
    with caplog.at_level(logging.ERROR, logger="bot.service"):
        service._loop(0.01)  # returns on the first check: no tick runs against a store that is not ours
    assert calls == [f"state_dir {state} was removed"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and str(state) in errors[0].getMessage()
