"""``rm -rf state_dir`` under a running serve: it exits non-zero within a tick, and a new run works alone."""

from __future__ import annotations

import shutil

from .conftest import Workspace, demo_loop, wait_for


def test_serve_exits_when_its_state_dir_is_removed_and_a_foreground_run_then_works_alone(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    bot = ws.serve()
    assert bot.proc is not None
    shutil.rmtree(ws.state_dir)
    proc = bot.proc
    wait_for(lambda: proc.poll() is not None, timeout=10, what="serve to exit after its state dir was removed")
    assert proc.returncode == 1
    log = bot.log()
    assert log.count(f"state_dir {ws.state_dir} was removed") == 1
    assert "ERROR" in next(line for line in log.splitlines() if "was removed" in line)
    ran = ws.cli("run", "demo")
    assert ran.returncode == 0, ran.stderr  # the demo pauses at its review: a foreground run on its own dir
    assert "handed" not in ran.stdout + ran.stderr
    reviews = ws.status()["reviews"]
    assert [r["status"] for r in reviews] == ["open"]
