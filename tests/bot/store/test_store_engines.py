"""Guarantees the contract suite showed on SQLite alone, now on every engine (issue 19 item 2).

Damaged and newer rows named by the store, a migration from an older schema
keeping every vote, a mutator that writes, intake dedupe keys and outbox
tasks raced by other processes, and kill -9 while votes are being cast.
Rows are changed behind the store's back with the engine's own client.
"""

from __future__ import annotations

import json
import os
import random
import re
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.review_records import Vote
from bot.store import CorruptDocumentError, NewerFormatError, Store
from bot.store.engines import translate
from loop_engine.checkpoint import HumanDecision

from . import pg_cluster
from .test_store_contract import IMPLS, ROOT, T0, Impl, make_review, make_run


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def store(impl: Impl, state: Path) -> Store:
    return impl.open(state)


def behind_its_back(impl: Impl, state: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Run one statement (psycopg's placeholders) on the store's database with the engine's own client."""
    if impl.name == "sqlite":
        with sqlite3.connect(state / "loopbot.db") as conn:
            conn.execute(translate(statement), params)
        return
    import psycopg

    options = f"-c search_path={pg_cluster.schema_for(state)}"
    with psycopg.connect(pg_cluster.url(), autocommit=True, options=options) as conn:
        conn.execute(statement, params)  # type: ignore[arg-type]


def approve(voter: str, key: str | None = None) -> Vote:
    return Vote(voter, HumanDecision.APPROVE, at=T0, delivery_key=key)


# -- rows the store did not write ---------------------------------------------------


def test_a_damaged_row_is_named_and_listings_go_on_without_it(store: Store, impl: Impl, state: Path) -> None:
    store.put_review(make_review())
    store.put_review(make_review("demo-2"))
    behind_its_back(impl, state, "UPDATE reviews SET doc = %s WHERE key = 'demo-1'", ('{"format": 1, "id": "de',))
    with pytest.raises(CorruptDocumentError, match=re.escape(f"{store.where} reviews/demo-1: not a valid JSON")):
        store.get_review("demo-1")
    assert [r.id for r in store.list_reviews()] == ["demo-2"]  # one bad row must not stop every tick
    assert [r.id for r in store.list_reviews(history=False, request=False)] == ["demo-2"]
    assert [line.split(":")[0] for line in store.problems()] == ["reviews/demo-1"]
    copied = json.dumps(make_review("demo-2").to_dict())
    behind_its_back(impl, state, "UPDATE reviews SET doc = %s WHERE key = 'demo-1'", (copied,))
    with pytest.raises(CorruptDocumentError, match="holds id 'demo-2'"):  # a copied row would take the other's votes
        store.get_review("demo-1")


def test_a_newer_run_document_is_refused_naming_the_store_and_both_versions(
    store: Store, impl: Impl, state: Path
) -> None:
    store.put_run(make_run())
    newer = json.dumps({**make_run().to_dict(), "format": 7})
    behind_its_back(impl, state, "UPDATE runs SET doc = %s", (newer,))
    with pytest.raises(NewerFormatError) as info:
        store.get_run("demo-run-1")
    assert f"{store.where} runs/demo-run-1" in str(info.value) and "version 7" in str(info.value)
    assert "up to 1" in str(info.value)


def test_a_database_at_schema_3_is_migrated_on_open_and_keeps_every_vote(
    store: Store, impl: Impl, state: Path
) -> None:
    store.put_review(make_review(required=99))
    for n in range(3):
        store.cast_votes({"demo-1": [(approve(f"local:v{n}", f"k{n}"), None)]})
    whole = json.dumps(store.get_review("demo-1").to_dict())
    # as schema 3 kept it: votes, history and keys inside the document, no votes, keys or current votes table, no
    # (loop, status) index, a task's attempts only in its document
    for older in ("DROP TABLE review_votes", "DROP TABLE review_keys", "DROP TABLE review_ballots",
                  "DROP INDEX runs_loop_status",
                  "DROP INDEX outbox_failing", "ALTER TABLE outbox DROP COLUMN attempts",
                  "UPDATE loopbot_schema SET version = 3"):
        behind_its_back(impl, state, older)
    behind_its_back(impl, state, "UPDATE reviews SET doc = %s", (whole,))
    store.close()  # type: ignore[attr-defined]
    again = impl.open(state)
    assert [v.voter for v in again.get_review("demo-1").history] == ["local:v0", "local:v1", "local:v2"]
    again.cast_votes({"demo-1": [(approve("local:v3", "k3"), None)]})
    assert impl.open(state).get_review("demo-1").delivery_keys == ["k0", "k1", "k2", "k3"]
    assert again.run_counts() == {}


def test_a_mutator_that_writes_does_not_wait_for_itself(store: Store, impl: Impl, state: Path) -> None:
    store.put_review(make_review())
    assert store.update_review("demo-1", lambda _review: store.next_id("note")) == "note-1"
    assert impl.open(state).next_id("note") == "note-2"


# -- other processes at the same keys -------------------------------------------------

INTAKE = """
import sys
from datetime import datetime, timezone
from bot.store import OutboxTask
{open_code}
at = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
for n in range(int(sys.argv[1])):
    if store.record_deliveries([(f"X-GitHub-Delivery {{n}}", [{{"n": n}}])])[0]:
        print("FIRST", n, flush=True)
    if store.add_task(OutboxTask(f"demo-{{n}}.post.slack", "slack", "post", None, {{"n": n}}, at)):
        print("ADDED", n, flush=True)
"""


def test_deliveries_and_tasks_raced_by_processes_are_each_taken_once(store: Store, impl: Impl, state: Path) -> None:
    n = 30
    code = INTAKE.format(open_code=impl.open_code(state))
    children = [subprocess.Popen([sys.executable, "-c", code, str(n)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
                for _ in range(3)]
    outputs = [child.communicate(timeout=120)[0].split("\n") for child in children]
    assert [child.returncode for child in children] == [0, 0, 0]
    lines = sorted(line for out in outputs for line in out if line)
    assert lines == sorted([f"ADDED {k}" for k in range(n)] + [f"FIRST {k}" for k in range(n)])  # once each
    keys = sorted(f"X-GitHub-Delivery {k}" for k in range(n))
    assert sorted(key for key, _work in store.pending_deliveries()) == keys
    assert len(store.pending_tasks()) == n


# -- kill -9 with votes in flight -----------------------------------------------------

VOTER = """
import sys
from datetime import datetime, timezone
from bot.review_records import Vote
from loop_engine.checkpoint import HumanDecision
{open_code}
for k in range(int(sys.argv[1]), 10_000):
    vote = Vote(f"local:v{{k % 3}}", HumanDecision.APPROVE, at=datetime.now(timezone.utc), delivery_key=f"k{{k}}")
    (result,) = store.cast_votes({{f"crash-{{k // 3}}": [(vote, None)]}})[f"crash-{{k // 3}}"]
    print("ACK", k, flush=True)  # what a channel would answer "recorded"
    if result.outcome is not None:
        print("DECIDED", k // 3, flush=True)
"""


def _vote_until_killed(code: str, start: int, acks: int) -> list[str]:
    """The lines a voting child printed before and as SIGKILL landed after ``acks`` acknowledgements."""
    child = subprocess.Popen([sys.executable, "-c", code, str(start)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    printed: list[str] = []
    deadline = time.monotonic() + 60
    with selectors.DefaultSelector() as waiting:
        waiting.register(child.stdout, selectors.EVENT_READ)
        while sum(line.startswith("ACK") for line in printed) < acks:
            assert time.monotonic() < deadline and child.poll() is None, f"the child stalled: {printed[-3:]}"
            if waiting.select(timeout=1):
                printed.append(child.stdout.readline().strip())
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=10) == -signal.SIGKILL
    printed += child.stdout.read().split("\n")
    child.stdout.close()
    return [line for line in printed if line]


def _acked(lines: list[str]) -> set[int]:
    """The votes acknowledged: whole lines only (a line the kill cut short was never seen by the voter)."""
    return {int(found[1]) for found in map(re.compile(r"ACK (\d+)").fullmatch, lines) if found}


def test_kill_9_while_casting_votes_loses_no_acknowledged_vote_and_decides_each_review_once(
    store: Store, impl: Impl, state: Path
) -> None:
    for n in range(200):
        store.put_review(make_review(f"crash-{n}", required=3, created_at=T0 + timedelta(seconds=n)))
    code = VOTER.format(open_code=impl.open_code(state))
    rng = random.Random(19)
    printed: list[str] = []
    start = 0
    for _ in range(4):
        lines = _vote_until_killed(code, start, rng.randint(3, 15))
        printed += lines
        start = max(_acked(lines)) + 1 - rng.randint(0, 4)
    reviews = {review.id: review for review in impl.open(state).list_reviews(archived=True)}
    for k in _acked(printed):
        assert f"k{k}" in reviews[f"crash-{k // 3}"].delivery_keys, f"acknowledged vote k{k} lost"
    decided = [line for line in printed if re.fullmatch(r"DECIDED \d+", line)]
    assert decided and len(set(decided)) == len(decided), "an outcome was reported twice"
    for review in reviews.values():
        assert len(set(review.delivery_keys)) == len(review.delivery_keys) <= 3
        assert (review.outcome is not None) == (len(review.votes) == 3)


def test_postgres_statements_are_sent_with_numbered_placeholders() -> None:
    from bot.store.engines import numbered

    assert numbered("INSERT INTO t VALUES (%s, %s::text), (%s, %s)") == "INSERT INTO t VALUES ($1, $2::text), ($3, $4)"
    assert numbered("SELECT 1") == "SELECT 1"
