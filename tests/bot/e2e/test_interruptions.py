"""SIGTERM with a slow step in flight, and kill -9 in the middle of applying a decision."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bot.store import SqliteStore

from ..slow_loop import trail_lines
from .conftest import Workspace, slow_loop, wait_for

pytestmark = pytest.mark.e2e


def started_steps(trail: Path) -> list[str]:
    return [line.split()[1] for line in trail_lines(trail) if line.startswith("start")]


def test_sigterm_lets_the_running_step_finish_saves_and_the_next_start_goes_on(ws: Workspace) -> None:
    trail = ws.root / "trail"
    ws.write_config([slow_loop(trail, steps=3, delay=1.5)])
    bot = ws.serve()
    wait_for(lambda: started_steps(trail) == ["step_1"], timeout=15, what="step 1 to start")

    begun = time.monotonic()
    assert bot.terminate(timeout=10) == 0
    assert time.monotonic() - begun < 10
    assert trail_lines(trail)[-1].startswith("done step_1")  # the step in flight finished ...
    assert started_steps(trail) == ["step_1"]  # ... and no other started
    (run,) = ws.status()["runs"]
    assert run["status"] == "running"  # not failed: it goes on at the next start
    assert "continues at the next start" in bot.log()

    ws.serve()
    ws.wait_run(run["id"], "completed", timeout=20)
    assert started_steps(trail) == ["step_1", "step_2", "step_3"]  # step 1 was saved, so it never ran again


def test_kill9_while_applying_a_decision_then_restart_applies_it_once(ws: Workspace) -> None:
    trail = ws.root / "trail"
    ws.write_config([slow_loop(trail, steps=3, delay=1.0, review_after=1)])
    first = ws.serve()
    review = ws.wait_open_review(loop="slow")
    assert ws.cli("decide", review["id"], "approve").returncode == 0
    wait_for(lambda: "step_2" in started_steps(trail), timeout=15, what="the resumed run to start step 2")
    first.kill9()  # mid-resume: the decision is in the snapshot, the review not yet marked applied
    assert ws.review(review["id"])["status"] == "decided"
    leftover = ws.state_dir / "local-reviews" / f".{review['id']}.md.k9x.tmp"  # as a write cut short by kill -9 leaves
    leftover.write_text("{")
    os.utime(leftover, (time.time() - 3600, time.time() - 3600))

    second = ws.serve()
    ws.wait_run(review["run"], "completed", timeout=20)
    assert not leftover.exists() and "removed 1 temp file(s) left by interrupted writes" in second.log()
    assert ws.review(review["id"])["status"] == "applied"
    snapshot = SqliteStore(ws.state_dir).load_snapshot(review["run"])
    assert snapshot is not None
    assert [d["decision"] for d in snapshot["decisions"]] == ["APPROVE"]  # applied exactly once
    assert started_steps(trail)[0] == "step_1" and started_steps(trail).count("step_1") == 1
    assert started_steps(trail)[-1] == "step_3"
    markdown = (ws.state_dir / "local-reviews" / f"{review['id']}.md").read_text()
    assert markdown.count("Decided: APPROVE by local:alice") == 1
