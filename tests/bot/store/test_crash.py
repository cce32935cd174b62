"""kill -9 at random moments loses no acknowledged vote or request and records no outcome twice.

Real processes, real SIGKILL: a child records votes (or enqueues run
requests) in a loop and prints each one after the store call returns - the
moment a channel would tell the voter "recorded". The parent kills it with
SIGKILL after a random number of acknowledgements, restarts it a few steps
back (so acknowledged votes are redelivered), and finally checks the store.
"""

from __future__ import annotations

from functools import partial

import os
import random
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, UTC
from pathlib import Path

from bot.review_records import Review, ReviewPolicy, Vote
from bot.reviews import cast_vote
from bot.store import SqliteStore, UnknownReviewError
from loop_engine.checkpoint import HumanDecision

ROOT = Path(__file__).resolve().parents[3]
VOTERS = 3
KILLS = 6


def _review(review_id: str) -> Review:
    return Review(
        id=review_id,
        loop="crash",
        run_id="crash-run-1",
        checkpoint_id="checkpoint_0001",
        request={"checkpoint_id": "checkpoint_0001"},
        policy=ReviewPolicy(approvals_required=VOTERS),
        created_at=datetime.now(UTC),
    )


def votes_child(state_dir: str, start: int) -> None:
    """Vote k is voter k % 3 on review crash-<k // 3> with delivery key k<k>; the third vote decides."""
    store = SqliteStore(state_dir)
    k = start
    while True:
        review_id = f"crash-{k // VOTERS}"
        try:
            store.get_review(review_id)
        except UnknownReviewError:
            store.put_review(_review(review_id))
        vote = Vote(f"local:v{k % VOTERS}", HumanDecision.APPROVE, delivery_key=f"k{k}", at=datetime.now(UTC))
        if k % 2:  # one review's update, or a batch as the Slack and GitHub intake cast them
            result = store.update_review(review_id, partial(cast_vote, vote=vote, now=datetime.now(UTC)))
        else:
            (result,) = store.cast_votes({review_id: [(vote, None)]})[review_id]  # type: ignore[misc]
        print(f"ACK {k}", flush=True)
        if result.outcome is not None:
            print(f"DECIDED {review_id} {result.outcome.decided_at.isoformat()}", flush=True)
        k += 1


def requests_child(state_dir: str, start: int) -> None:
    store = SqliteStore(state_dir)
    k = start
    while True:
        request_id = store.enqueue_request("run", {"loop": "demo", "k": k})
        print(f"ACK {k} {request_id}", flush=True)
        k += 1


def _run_and_kill(kind: str, state_dir: Path, start: int, acks_before_kill: int) -> list[str]:
    """Start a child, SIGKILL it after ``acks_before_kill`` acknowledgements, return every line it printed."""
    code = f"from tests.bot.store.test_crash import {kind}_child; {kind}_child({str(state_dir)!r}, {start})"
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    lines: list[str] = []
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 30
    try:
        while sum(line.startswith("ACK") for line in lines) < acks_before_kill:
            assert time.monotonic() < deadline, f"child made no progress: {lines[-3:]}"
            assert child.poll() is None, f"child exited early with {child.returncode}"
            if selector.select(timeout=1):
                line = child.stdout.readline()
                assert line.endswith("\n"), f"child exited early with {child.wait(timeout=10)}"
                lines.append(line.strip())
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
        # acknowledged before the kill landed; a line the kill cut short (no newline) is no acknowledgement
        lines += child.stdout.read().split("\n")[:-1]
    finally:
        selector.close()
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
        child.stdout.close()
    return [line for line in lines if line]


def _the_database_is_whole(state_dir: Path) -> None:
    """SQLite's own check of every page and index, and every row readable by the store."""
    with sqlite3.connect(state_dir / "loopbot.db") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store = SqliteStore(state_dir)
    assert store.list_reviews(archived=True) is not None and store.take_requests() is not None
    assert store.problems() == []


def _kill_repeatedly(kind: str, state_dir: Path, seed: int) -> list[str]:
    rng = random.Random(seed)
    printed: list[str] = []
    next_k = 0
    for _ in range(KILLS):
        lines = _run_and_kill(kind, state_dir, max(0, next_k - rng.randint(0, 4)), rng.randint(2, 12))
        printed += lines
        acked = [int(line.split()[1]) for line in lines if line.startswith("ACK")]
        next_k = max(acked) + 1
    return printed


def test_kill_9_while_voting_loses_no_acknowledged_vote(tmp_path: Path) -> None:
    printed = _kill_repeatedly("votes", tmp_path, seed=4)
    _the_database_is_whole(tmp_path)
    store = SqliteStore(tmp_path)
    reviews = {review.id: review for review in store.list_reviews()}

    acked = {int(line.split()[1]) for line in printed if line.startswith("ACK")}
    for k in acked:
        review = reviews[f"crash-{k // VOTERS}"]
        assert f"k{k}" in review.delivery_keys, f"acknowledged vote k{k} lost"

    decided = [line.split() for line in printed if line.startswith("DECIDED")]
    assert decided, "no review was decided; the test exercised nothing"
    assert len({review_id for _, review_id, _ in decided}) == len(decided), "an outcome was reported twice"
    for _, review_id, decided_at in decided:
        outcome = reviews[review_id].outcome
        assert outcome is not None and outcome.decided_at.isoformat() == decided_at, "an outcome was replaced"
    for review in reviews.values():
        assert len(review.votes) <= VOTERS and len(set(review.delivery_keys)) == len(review.delivery_keys)
        if review.outcome is not None:
            assert review.status == "decided" and len(review.outcome.decided_by) == VOTERS
        else:
            assert len(review.votes) < VOTERS


def test_kill_9_while_enqueueing_loses_no_acknowledged_request(tmp_path: Path) -> None:
    printed = _kill_repeatedly("requests", tmp_path, seed=11)
    _the_database_is_whole(tmp_path)
    acknowledged = [line.split()[2] for line in printed if line.startswith("ACK")]
    assert len(acknowledged) == len(set(acknowledged)), "a request id was handed out twice"
    stored = [request.id for request in SqliteStore(tmp_path).take_requests()]
    assert len(stored) == len(set(stored))
    assert set(acknowledged) <= set(stored), f"lost: {set(acknowledged) - set(stored)}"
