"""A run pauses, a person decides with `loopbot decide`, the run completes - across kill -9 too."""

from __future__ import annotations

import time

import pytest

from bot.store import SqliteStore

from .conftest import Workspace, demo_loop, wait_for

pytestmark = pytest.mark.e2e


def test_run_on_start_pauses_and_decide_completes_it(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True)], scheduler={"poll_interval": 0.5})  # the default interval
    bot = ws.serve()
    review = ws.wait_open_review()
    run_id = review["run"]
    assert ws.run(run_id)["status"] == "waiting"
    assert (ws.state_dir / "local-reviews" / f"{review['id']}.md").is_file()
    wait_for(lambda: f"loopbot decide {review['id']} approve" in bot.log(), what="the decide line in the log")

    done = ws.cli("decide", review["id"], "approve")
    decided = time.monotonic()
    assert done.returncode == 0, done.stderr
    assert "decided" in done.stdout and "resumes the run within a second" in done.stdout
    store = SqliteStore(ws.state_dir)  # read in-process: a `status` subprocess per poll is too slow to time this
    wait_for(lambda: store.get_run(run_id).status == "completed", timeout=15, what=f"run {run_id} to complete")
    assert time.monotonic() - decided < 1.5  # one poll interval, plus the demo's few steps

    run = ws.wait_run(run_id, "completed")
    assert run["review"] == review["id"]
    assert ws.review(review["id"])["status"] == "applied"
    health = bot.healthz().json()
    # the ended run left the hot set (healthz counts the work to do; status shows it as a recent run)
    assert health["status"] == "ok" and health["runs"] == {} and health["open_reviews"] == 0
    assert "APPROVE by local:alice" in (ws.state_dir / "local-reviews" / f"{review['id']}.md").read_text()


def test_a_scheduled_run_pauses_and_decide_completes_it(ws: Workspace) -> None:
    ws.write_config([demo_loop(schedule={"interval": "1s"})])
    ws.serve()
    review = ws.wait_open_review()
    assert ws.run(review["run"])["trigger"] == "schedule"
    assert ws.cli("decide", review["id"], "approve").returncode == 0
    run = ws.wait_run(review["run"], "completed")
    assert run["review"] == review["id"] and ws.review(review["id"])["status"] == "applied"


def test_kill9_while_waiting_then_restart_and_decide(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True)])
    first = ws.serve()
    review = ws.wait_open_review()
    first.kill9()

    ws.serve()  # run_on_start again: skipped, the waiting run holds the loop's slot
    assert ws.status()["runs"] == [ws.run(review["run"])] and ws.run(review["run"])["status"] == "waiting"
    assert ws.cli("decide", review["id"], "approve").returncode == 0
    ws.wait_run(review["run"], "completed")
    assert len(ws.status()["runs"]) == 1


def test_decision_while_server_is_down_is_applied_at_start(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True)])
    first = ws.serve()
    review = ws.wait_open_review()
    first.kill9()

    done = ws.cli("decide", review["id"], "approve")
    assert done.returncode == 0, done.stderr
    assert "no server is running" in done.stdout
    assert ws.run(review["run"])["status"] == "waiting"

    ws.serve()
    ws.wait_run(review["run"], "completed")


def test_foreground_run_pauses_then_decide_and_serve_complete_it(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    done = ws.cli("run", "demo")
    assert done.returncode == 0, done.stderr
    assert "run demo-run-1: waiting" in done.stdout
    assert "loopbot decide demo-1 approve" in done.stdout
    assert (ws.state_dir / "local-reviews" / "demo-1.md").is_file()

    assert ws.cli("decide", "demo-1", "approve").returncode == 0
    assert ws.run("demo-run-1")["status"] == "waiting"  # nobody applies it until a server runs
    ws.serve()
    ws.wait_run("demo-run-1", "completed")


def test_run_with_a_server_is_handed_to_it(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    bot = ws.serve()
    done = ws.cli("run", "demo")
    assert done.returncode == 0, done.stderr
    assert f"handed to the running server (pid {bot.proc.pid}): request " in done.stdout
    review = ws.wait_open_review()
    assert ws.run(review["run"])["trigger"].startswith("cli")
