"""The Store contract: every engine runs these tests (SQLite, PostgreSQL).

Add an engine by adding an ``Impl`` to ``IMPLS``: ``open`` builds a store
on a location (a temp dir), ``open_code`` is the Python source a child
process uses to open the same store.
"""

from __future__ import annotations

from functools import partial

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any

import pytest

import sqlite3

from bot.review_records import Review, ReviewPolicy, Vote
from bot.reviews import cast_vote
from bot.store import (
    CorruptDocumentError,
    NewerFormatError,
    OutboxTask,
    RunRecord,
    Store,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
    UnknownTaskError,
)
from bot.store.engines import BUSY_TIMEOUT
from bot.store.sql import PostgresStore, SqliteStore
from loop_engine.checkpoint import HumanDecision

from . import pg_cluster

ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@dataclass
class Impl:
    name: str
    open: Callable[[Path], Store]
    open_code: Callable[[Path], str]


IMPLS = [
    Impl("sqlite", lambda p: SqliteStore(p),
         lambda p: f"from bot.store.sql import SqliteStore; store = SqliteStore({str(p)!r})"),
    Impl(
        "postgres",
        lambda p: PostgresStore(pg_cluster.url(), schema=pg_cluster.schema_for(p)),
        lambda p: f"from bot.store.sql import PostgresStore; "
        f"store = PostgresStore({pg_cluster.url()!r}, schema={pg_cluster.schema_for(p)!r})",
    ),
]


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


@pytest.fixture
def store(impl: Impl, tmp_path: Path) -> Store:
    return impl.open(tmp_path / "state")


def make_run(run_id: str = "demo-run-1", **kw: Any) -> RunRecord:
    fields: dict[str, Any] = {"loop": "demo", "status": "running", "created_at": T0, "updated_at": T0, "trigger": "cli"}
    fields.update(kw)
    return RunRecord(id=run_id, **fields)


def make_review(review_id: str = "demo-1", required: int = 1, created_at: datetime = T0) -> Review:
    return Review(
        id=review_id,
        loop="demo",
        run_id="demo-run-1",
        checkpoint_id="checkpoint_0001",
        request={"checkpoint_id": "checkpoint_0001", "text": "ünïcode | pipes"},
        policy=ReviewPolicy(approvals_required=required),
        created_at=created_at,
    )


def recorded(store: Store, key: str, work: list[dict[str, Any]] | None = None) -> bool:
    """``record_deliveries`` of one delivery: the first time ``key`` is seen?"""
    return store.record_deliveries([(key, work)])[0]


def make_task(task_id: str = "demo-1.post.slack-C0123", **kw: Any) -> OutboxTask:
    fields: dict[str, Any] = {
        "channel": "slack",
        "action": "post",
        "review_id": "demo-1",
        "payload": {"text": "ünï", "n": [1, None]},
        "created_at": T0,
    }
    fields.update(kw)
    return OutboxTask(id=task_id, **fields)


# -- runs and snapshots -----------------------------------------------------


def test_runs_round_trip_and_list_in_creation_order(store: Store) -> None:
    later = make_run("demo-run-10", created_at=T0 + timedelta(minutes=1), result={"x": [1, 2]})
    store.put_run(later)
    store.put_run(make_run("demo-run-2"))
    assert store.get_run("demo-run-10") == later
    assert store.get_run("DEMO-RUN-10") == later
    assert [r.id for r in store.list_runs()] == ["demo-run-2", "demo-run-10"]


def test_update_run_persists_and_returns_the_mutators_value(store: Store, impl: Impl, tmp_path: Path) -> None:
    store.put_run(make_run())

    def finish(run: RunRecord) -> str:
        run.status, run.iterations, run.reason = "completed", 3, "done"
        return "ok"

    assert store.update_run("demo-run-1", finish) == "ok"
    again = impl.open(tmp_path / "state").get_run("demo-run-1")
    assert (again.status, again.iterations, again.reason) == ("completed", 3, "done")


def test_unknown_run(store: Store) -> None:
    with pytest.raises(UnknownRunError, match="demo-run-9"):
        store.get_run("demo-run-9")
    with pytest.raises(UnknownRunError):
        store.update_run("demo-run-9", lambda r: None)


def test_snapshots_load_as_imported_until_a_state_replaces_them(store: Store) -> None:
    from loop_engine.types import LoopState

    assert store.load_snapshot("demo-run-1") is None
    snapshot = {"schema_version": 1, "current_iteration": 2, "nested": {"a": [1, None, "ü"]}}
    document = {"format": 1, "run_id": "demo-run-1", "snapshot": snapshot}  # as an upgrade imports it
    store.put_snapshot_bytes("demo-run-1", json.dumps(document).encode())  # type: ignore[attr-defined]
    assert store.load_snapshot("demo-run-1") == snapshot
    store.save_state("demo-run-1", LoopState(current_iteration=3))
    loaded = store.load_snapshot("demo-run-1")
    assert loaded is not None and loaded["current_iteration"] == 3 and "nested" not in loaded


# -- reviews ----------------------------------------------------------------


def test_reviews_round_trip_case_insensitively(store: Store) -> None:
    review = make_review("Demo-7")
    store.put_review(review)
    assert store.get_review("demo-7") == review
    assert store.get_review("DEMO-7").id == "Demo-7"
    store.put_review(make_review("demo-8", created_at=T0 - timedelta(hours=1)))
    assert [r.id for r in store.list_reviews()] == ["demo-8", "Demo-7"]


def test_get_reviews_reads_many_as_get_review_without_history_reads_each(store: Store) -> None:
    store.put_review(make_review("Demo-7"))
    voted = make_review("demo-8", required=2)
    cast_vote(voted, Vote("local:alice", HumanDecision.APPROVE, at=T0, delivery_key="k1"), now=T0)
    store.put_review(voted)
    found = store.get_reviews(["DEMO-7", "demo-8", "demo-9", "../x", "demo-8"])
    assert found == {"DEMO-7": store.get_review("demo-7", history=False, votes=False),
                     "demo-8": store.get_review("demo-8", history=False, votes=False)}
    assert found["demo-8"].votes == found["demo-8"].history == [] and store.get_reviews([]) == {}


def test_update_review_records_votes_and_returns_the_result(store: Store, impl: Impl, tmp_path: Path) -> None:
    store.put_review(make_review(required=2))
    vote = Vote("local:alice", HumanDecision.APPROVE)
    result = store.update_review("DEMO-1", lambda r: cast_vote(r, vote, now=T0))
    assert result.accepted
    assert impl.open(tmp_path / "state").get_review("demo-1").approvals == ["local:alice"]


def test_a_failing_mutation_writes_nothing(store: Store) -> None:
    store.put_review(make_review())

    def explode(review: Review) -> None:
        review.status = "decided"
        raise RuntimeError("bug in the mutator")

    with pytest.raises(RuntimeError):
        store.update_review("demo-1", explode)
    assert store.get_review("demo-1").status == "open"


def test_an_update_that_changes_the_id_is_refused_and_writes_nothing(store: Store) -> None:
    store.put_run(make_run())
    store.put_review(make_review())
    store.add_task(make_task())

    def move(record: Any) -> None:
        record.status = "decided" if isinstance(record, Review) else "failed"
        record.id = "demo-9"

    with pytest.raises(StoreError, match="run demo-run-1: an update may not change its id to 'demo-9'"):
        store.update_run("demo-run-1", move)
    with pytest.raises(StoreError, match="review demo-1: an update may not change its id to 'demo-9'"):
        store.update_review("demo-1", move)
    with pytest.raises(StoreError, match="task demo-1.post.slack-C0123: an update may not change its id"):
        store.update_task("demo-1.post.slack-C0123", lambda task: setattr(task, "id", "demo-9.post.slack-C0123"))
    assert store.get_run("demo-run-1").status == "running"
    assert store.get_review("demo-1").status == "open"
    assert [task.id for task in store.pending_tasks()] == ["demo-1.post.slack-C0123"]


def test_unknown_review_suggests_close_ids(store: Store) -> None:
    store.put_review(make_review("triage-17"))
    with pytest.raises(UnknownReviewError, match='did you mean "triage-17"'):
        store.get_review("triage-71")
    with pytest.raises(UnknownReviewError, match="nope"):
        store.update_review("nope", lambda r: None)
    with pytest.raises(UnknownReviewError):
        store.get_review("../../etc/passwd")


def test_ids_that_could_escape_are_refused(store: Store) -> None:
    with pytest.raises(StoreError):
        store.put_run(make_run("../evil"))
    with pytest.raises(StoreError):
        store.next_id("a/b")


# -- ids and the inbox ------------------------------------------------------


def test_next_id_counts_per_prefix_and_survives_reopening(store: Store, impl: Impl, tmp_path: Path) -> None:
    assert [store.next_id("triage") for _ in range(3)] == ["triage-1", "triage-2", "triage-3"]
    assert store.next_id("triage-run") == "triage-run-1"
    assert impl.open(tmp_path / "state").next_id("triage") == "triage-4"


def test_inbox_is_durable_until_finished(store: Store, impl: Impl, tmp_path: Path) -> None:
    first = store.enqueue_request("run", {"loop": "demo"})
    second = store.enqueue_request("run", {"loop": "other"})
    for _ in range(9):  # ids past 10 still come out in order
        store.finish_request(store.enqueue_request("run", {}))
    third = store.enqueue_request("run", {"loop": "x"})
    taken = store.take_requests()
    assert [r.id for r in taken] == [first, second, third]
    assert taken[0].kind == "run" and taken[0].payload == {"loop": "demo"}
    assert [r.id for r in store.take_requests()] == [first, second, third]  # at-least-once
    store.finish_request(first)
    store.finish_request(first)  # harmless twice
    assert [r.id for r in impl.open(tmp_path / "state").take_requests()] == [second, third]


# -- concurrency ------------------------------------------------------------


def test_update_review_is_serialised_across_threads(store: Store) -> None:
    store.put_review(make_review(required=10_000))

    def voter(t: int) -> None:
        for i in range(15):
            vote = Vote(f"local:t{t}-{i}", HumanDecision.APPROVE)
            assert store.update_review("demo-1", partial(cast_vote, vote=vote, now=T0)).accepted

    threads = [threading.Thread(target=voter, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(store.get_review("demo-1").votes) == 6 * 15


CHILD = """
import sys
from datetime import datetime, timezone
from bot.review_records import Vote
from bot.reviews import cast_vote
from loop_engine.checkpoint import HumanDecision
{open_code}
tag, n = sys.argv[1], int(sys.argv[2])
now = datetime.now(timezone.utc)
for i in range(n):
    vote = Vote(f"local:{{tag}}-{{i}}", HumanDecision.APPROVE)
    assert store.update_review("demo-1", lambda r: cast_vote(r, vote, now=now)).accepted
    store.update_run("demo-run-1", lambda r: setattr(r, "iterations", r.iterations + 1))
    print(store.next_id("shared"), flush=True)
"""


def test_updates_and_ids_are_serialised_across_processes(store: Store, impl: Impl, tmp_path: Path) -> None:
    store.put_review(make_review(required=10_000))
    store.put_run(make_run())
    code = CHILD.format(open_code=impl.open_code(tmp_path / "state"))
    n = 25
    children = [
        subprocess.Popen([sys.executable, "-c", code, tag, str(n)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for tag in ("p1", "p2")
    ]
    outputs = [child.communicate(timeout=120)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    ids = [line for out in outputs for line in out.split()]
    assert sorted(ids) == sorted(f"shared-{i}" for i in range(1, 2 * n + 1))  # none repeated, none lost
    assert len(store.get_review("demo-1").votes) == 2 * n
    assert store.get_run("demo-run-1").iterations == 2 * n


# -- SQLite specifics: the file, damaged rows, newer formats ------------------


def _row_doc(path: Path, table: str, key: str, doc: str) -> None:
    with sqlite3.connect(path / "loopbot.db") as conn:
        conn.execute(f"UPDATE {table} SET doc = ? WHERE key = ?", (doc, key))


def test_a_damaged_row_is_named_with_the_file_and_the_others_still_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.put_review(make_review())
    store.put_review(make_review("demo-2"))
    _row_doc(tmp_path, "reviews", "demo-1", '{"format": 1, "id": "demo-1", "lo')
    with pytest.raises(CorruptDocumentError, match=f"{tmp_path / 'loopbot.db'} reviews/demo-1: not a valid JSON"):
        store.get_review("demo-1")
    assert store.get_review("demo-2").id == "demo-2"
    _row_doc(tmp_path, "reviews", "demo-1", '{"format": 1, "id": "demo-1"}')
    with pytest.raises(CorruptDocumentError, match="reviews/demo-1: damaged"):
        store.get_review("demo-1")
    _row_doc(tmp_path, "reviews", "demo-1", json.dumps({**make_review("demo-2").to_dict()}))
    with pytest.raises(CorruptDocumentError, match="holds id 'demo-2'"):  # a copied row would take the other's votes
        store.get_review("demo-1")


def test_newer_format_is_refused_naming_file_and_versions(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.put_run(make_run())
    document = store.get_run("demo-run-1").to_dict()
    document["format"] = 7
    with sqlite3.connect(tmp_path / "loopbot.db") as conn:
        conn.execute("UPDATE runs SET doc = ?", (json.dumps(document),))
    with pytest.raises(NewerFormatError) as info:
        store.get_run("demo-run-1")
    message = str(info.value)
    assert str(tmp_path / "loopbot.db") in message and "version 7" in message and "up to 1" in message


def test_the_database_is_one_file_in_wal_mode_synced_in_full(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state")
    store.put_run(make_run())
    with store.engine.write() as cur:  # the pragmas every connection of the store runs with
        assert cur.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert cur.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert cur.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT * 1000  # another writer is waited for
    assert sorted(p.name for p in (tmp_path / "state").iterdir() if p.name.startswith("loopbot.db")) == [
        "loopbot.db", "loopbot.db-shm", "loopbot.db-wal"]


def test_reading_writes_nothing(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "state").close()  # created and migrated; closing moves the WAL into the file
    before = (tmp_path / "state" / "loopbot.db").stat().st_mtime_ns
    store = SqliteStore(tmp_path / "state")
    assert store.list_runs() == [] and store.list_reviews() == [] and store.take_requests() == []
    with pytest.raises(UnknownReviewError):
        store.update_review("demo-1", lambda r: None)
    assert store.open_reviews() == store.decided_reviews() == store.due_reviews(T0) == [] and store.problems() == []
    assert store.review_for_run("demo-run-1") is None
    assert store.active_runs() == store.recent_runs() == [] and store.active_run("demo") is None
    assert store.run_with_trigger("cli") is None and store.load_state("demo-run-1") is None
    assert store.counts() == {"runs": {}, "open_reviews": 0, "decided_reviews": 0, "outbox_pending": 0}
    assert store.run_counts() == {} and store.outbox_backlog() == {}
    assert store.due_tasks("slack", T0) == store.pending_tasks() == [] and store.next_task_at("slack") is None
    with pytest.raises(UnknownTaskError):
        store.update_task("a.post", lambda t: None)
    store.close()
    assert (tmp_path / "state" / "loopbot.db").stat().st_mtime_ns == before
    with sqlite3.connect(tmp_path / "state" / "loopbot.db") as conn:
        assert conn.execute("SELECT count(*) FROM counters").fetchone()[0] == 0


def test_sqlite_counts_runs_from_the_loop_status_index_not_the_run_documents(tmp_path: Path) -> None:
    from bot.store.sql_runs import RUN_COUNTS

    SqliteStore(tmp_path / "state").close()
    with sqlite3.connect(tmp_path / "state" / "loopbot.db") as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + RUN_COUNTS).fetchall())
    assert "COVERING INDEX runs_loop_status" in plan, plan
