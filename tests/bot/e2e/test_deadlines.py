"""A review deadline set before a restart fires after it, and says it timed out."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from .conftest import Workspace, demo_loop, wait_for

pytestmark = pytest.mark.e2e


def test_deadline_fires_after_a_kill9_restart(ws: Workspace) -> None:
    # 4 s: long enough to see the review open and kill the bot before its deadline on busy cores
    ws.write_config([demo_loop(run_on_start=True, review={"timeout": {"decide_after": "4s", "default": "reject"}})])
    first = ws.serve()
    review = ws.wait_open_review()
    first.kill9()
    assert ws.review(review["id"])["status"] == "open"  # it was killed before the deadline

    deadline = datetime.fromisoformat(review["created_at"]).timestamp() + 4
    wait_for(lambda: time.time() > deadline + 0.2, timeout=7, what="the deadline to pass while the bot is down")
    assert ws.review(review["id"])["status"] == "open"  # nobody decides while the bot is down

    ws.serve()
    run = ws.wait_run(review["run"], "rejected")
    final = ws.review(review["id"])
    assert final["timed_out"] is True and final["outcome"]["decided_by"] == ["timeout"]
    assert "timed out" in final["outcome"]["feedback"] and "timed out" in run["reason"]
