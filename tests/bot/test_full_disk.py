"""A full disk and a read-only store: /healthz must not say all is well, and a vote that was not stored says so.

A step that hits a full disk cannot even mark its run failed; a real tmpfs
(``tmpfs_support``, mounted as root) is filled to its last byte or remounted
read-only under the state dir.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from bot.desk import Authorizer, ListMembership, VotePath
from bot.health import health
from bot.service import Service
from bot.store import SqliteStore
from loop_engine.types import LoopState

from .runtime_support import bench, demo
from .tmpfs_support import fill, read_only, tmpfs


class FullDisk(SqliteStore):
    """Every snapshot and run write fails with ENOSPC once ``full`` is set."""

    full = False

    def _no_space(self) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device")

    def save_state(self, run_id: str, state: LoopState) -> None:
        self._no_space()
        super().save_state(run_id, state)

    def update_run(self, run_id: str, mutate: Any) -> Any:
        self._no_space()
        return super().update_run(run_id, mutate)


def test_a_run_stopped_by_a_full_disk_makes_healthz_503_naming_it(tmp_path: Path) -> None:
    store = FullDisk(tmp_path / "state")
    b = bench(tmp_path, [demo()], store=store)
    store.full = True  # the run record is written; its first snapshot is not
    run_id = b.runner.request_run("demo", trigger="schedule")
    assert run_id is not None and b.runner.join(10)
    assert store.get_run(run_id).status == "running"  # the store cannot say otherwise ...
    service = Service(store, b.runner, clock=b.clock)
    code, body = health(store, b.config.state_dir, service)
    assert code == 503  # ... so healthz does
    assert f"run {run_id} stopped and its end could not be recorded" in body["error"]
    assert "No space left on device" in body["error"]
    store.full = False
    restarted = bench(tmp_path, [demo()])  # after the disk is fixed, a restart continues the run
    restarted.runner.recover()
    assert restarted.runner.join(10)
    assert restarted.store.get_run(run_id).status == "waiting"
    assert Service(restarted.store, restarted.runner).problem() is None


def _opened(tmp_path: Path) -> tuple[Any, str]:
    """A bench whose state dir is a fresh 8 MB tmpfs, with one open review."""
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    (review,) = b.store.open_reviews()
    return b, review.id


def test_healthz_is_503_on_a_full_disk_and_200_once_space_is_freed(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "state"):
        b, _ = _opened(tmp_path)
        assert health(b.store, b.config.state_dir)[0] == 200
        filler = fill(b.config.state_dir)
        code, body = health(b.store, b.config.state_dir)
        assert code == 503 and "full disk" in body["error"], body
        filler.unlink()
        assert health(b.store, b.config.state_dir)[0] == 200


def test_healthz_is_503_on_a_read_only_state_dir(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "state"):
        b, _ = _opened(tmp_path)
        b.store.close()  # a file open for writing keeps the kernel from remounting read-only
        read_only(b.config.state_dir)
        code, body = health(b.store, b.config.state_dir)
        assert code == 503 and "read-only" in body["error"], body


class NoRoomForVotes(SqliteStore):
    """A disk with a few kB left: every cheap check passes, but a vote does not fit (ENOSPC) while ``full``."""

    full = False

    def cast_votes(self, batch: Any) -> Any:
        if self.full:
            return {review_id: OSError(errno.ENOSPC, "No space left on device") for review_id in batch}
        return super().cast_votes(batch)


def test_healthz_is_503_after_a_vote_could_not_be_stored_until_one_is(tmp_path: Path) -> None:
    store = NoRoomForVotes(tmp_path / "state")
    b = bench(tmp_path, [demo(review={"approvals_required": 2})], store=store)
    b.runner.run_foreground("demo")
    (review,) = store.open_reviews()
    votes = VotePath(store, Authorizer({"local": ListMembership("local")}), clock=b.clock)
    assert health(store, b.config.state_dir, votes=votes)[0] == 200
    store.full = True
    with pytest.raises(OSError):
        votes.handle(Reply(Identity("local", "alice"), parse_command(f"approve {review.id}")))
    code, body = health(store, b.config.state_dir, votes=votes)
    assert code == 503 and "could not be stored" in body["error"] and "No space left" in body["error"], body
    store.full = False
    answer = votes.handle(Reply(Identity("local", "alice"), parse_command(f"approve {review.id}")))
    assert answer.kind is AnswerKind.COUNTED
    assert health(store, b.config.state_dir, votes=votes)[0] == 200
