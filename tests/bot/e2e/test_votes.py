"""N-of-M approvals, veto, unauthorised, duplicate and late votes through the real CLI."""

from __future__ import annotations

import pytest

from .conftest import Workspace, demo_loop

pytestmark = pytest.mark.e2e


def test_two_of_three_duplicate_unauthorised_and_late_votes(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True, review={"approvals_required": 2})])
    ws.serve()
    review = ws.wait_open_review()
    rid = review["id"]

    first = ws.cli("decide", rid, "approve", "--as", "alice")
    assert first.returncode == 0 and "1 of 2" in first.stdout
    again = ws.cli("decide", rid, "lgtm", "--as", "alice")  # the same person again: counts once
    assert again.returncode == 0, again.stderr
    assert ws.review(rid)["status"] == "open" and ws.review(rid)["approvals"] == 1

    before = ws.fingerprint()
    refused = ws.cli("decide", rid, "approve", "--as", "mallory")
    assert refused.returncode == 1
    assert "mallory is not a reviewer" in refused.stderr
    assert ws.fingerprint() == before

    second = ws.cli("decide", rid, "approve", "--as", "bob")
    assert second.returncode == 0 and "decided" in second.stdout
    run = ws.wait_run(review["run"], "completed")
    assert run["status"] == "completed"
    assert sorted(ws.review(rid)["outcome"]["decided_by"]) == ["local:alice", "local:bob"]

    settled = ws.fingerprint()
    late = ws.cli("decide", rid, "reject", "--feedback", "too late", "--as", "carol")
    assert late.returncode == 1
    assert "already decided by local:alice, local:bob" in late.stderr
    assert ws.fingerprint() == settled  # the late vote is not recorded anywhere


def test_reject_vetoes_and_ends_the_run_rejected(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True, review={"approvals_required": 2})])
    ws.serve()
    review = ws.wait_open_review()
    assert ws.cli("decide", review["id"], "approve", "--as", "alice").returncode == 0

    no_reason = ws.cli("decide", review["id"], "reject", "--as", "bob")
    assert no_reason.returncode == 2 and "reason" in no_reason.stderr  # usage: the line alone is wrong

    veto = ws.cli("decide", review["id"], "reject", "--feedback", "labels look wrong", "--as", "bob")
    assert veto.returncode == 0, veto.stderr
    run = ws.wait_run(review["run"], "rejected")
    assert "labels look wrong" in run["reason"]
    assert ws.review(review["id"])["outcome"]["decided_by"] == ["local:bob"]
