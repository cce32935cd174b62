"""A step that hits a full disk: the run cannot even be marked failed - /healthz must not say all is well."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from bot.server import health
from bot.service import Service
from bot.store import SqliteStore
from loop_engine.types import LoopState

from .runtime_support import bench, demo


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
