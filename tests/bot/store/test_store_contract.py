"""The Store contract: every implementation runs these tests (FileStore now, a SQL store later).

Add an implementation by adding an ``Impl`` to ``IMPLS``: ``open`` builds a
store on a location (a temp dir), ``open_code`` is the Python source a child
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

import bot.store.documents as documents_module
from bot.reviews import Review, ReviewPolicy, Vote, cast_vote
from bot.store import (
    CorruptDocumentError,
    FileStore,
    NewerFormatError,
    OutboxTask,
    RunRecord,
    Store,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
    UnknownTaskError,
)
from bot.store.sql import PostgresStore
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
    Impl("files", lambda p: FileStore(p), lambda p: f"from bot.store import FileStore; store = FileStore({str(p)!r})"),
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


def test_snapshots(store: Store) -> None:
    assert store.load_snapshot("demo-run-1") is None
    snapshot = {"schema_version": 1, "current_iteration": 2, "nested": {"a": [1, None, "ü"]}}
    store.save_snapshot("demo-run-1", snapshot)
    assert store.load_snapshot("demo-run-1") == snapshot
    store.save_snapshot("demo-run-1", {"current_iteration": 3})
    assert store.load_snapshot("demo-run-1") == {"current_iteration": 3}


# -- reviews ----------------------------------------------------------------


def test_reviews_round_trip_case_insensitively(store: Store) -> None:
    review = make_review("Demo-7")
    store.put_review(review)
    assert store.get_review("demo-7") == review
    assert store.get_review("DEMO-7").id == "Demo-7"
    store.put_review(make_review("demo-8", created_at=T0 - timedelta(hours=1)))
    assert [r.id for r in store.list_reviews()] == ["demo-8", "Demo-7"]


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
from bot.reviews import Vote, cast_vote
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


# -- FileStore specifics: files, formats, atomic writes ---------------------


def test_corrupt_document_is_named_and_set_aside_by_a_scan(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_review(make_review())
    path = tmp_path / "reviews" / "demo-1.json"
    path.write_text('{"format": 1, "id": "demo-1", "lo')
    with pytest.raises(CorruptDocumentError, match=str(path)):
        store.get_review("demo-1")
    assert store.list_reviews() == []  # one bad file no longer stops every review (issue 12.8)
    (problem,) = store.problems()
    assert problem.startswith("reviews/demo-1.json: ") and str(path) in problem
    with pytest.raises(CorruptDocumentError, match="quarantined"):
        store.get_review("demo-1")
    path.write_text('{"format": 1, "id": "demo-1"}')
    with pytest.raises(CorruptDocumentError, match=f"{path}: damaged"):
        store.get_review("demo-1")


def test_a_corrupt_request_is_set_aside_once_and_the_others_are_taken(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStore(tmp_path)
    first, second = store.enqueue_request("run", {"loop": "a"}), store.enqueue_request("run", {"loop": "b"})
    broken = tmp_path / "inbox" / f"{first}.json"
    broken.write_text('{"format": 1, "id": "req')
    assert [r.id for r in store.take_requests()] == [second]
    assert not broken.exists() and broken.with_name(broken.name + ".corrupt").read_text().startswith('{"format"')
    assert [r.id for r in store.take_requests()] == [second]
    assert len([r for r in caplog.records if "moved it to" in r.getMessage()]) == 1 and str(broken) in caplog.text


def test_newer_format_is_refused_naming_file_and_versions(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_run(make_run())
    path = tmp_path / "runs" / "demo-run-1.json"
    document = json.loads(path.read_text())
    document["format"] = 7
    path.write_text(json.dumps(document))
    with pytest.raises(NewerFormatError) as info:
        store.get_run("demo-run-1")
    assert str(path) in str(info.value) and "version 7" in str(info.value) and "up to 1" in str(info.value)


def test_every_write_goes_through_the_atomic_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Temp + fsync + rename, nothing else.

    The one file appended to - the journal of accepted webhook deliveries - has tests of its own
    (test_delivery_files.py): a line cut short is dropped, an fsync covers every line it answers for.
    """
    written: list[str] = []
    real = documents_module.atomic_write_bytes

    def recording(path: Any, data: bytes, **kw: Any) -> Path:
        written.append(Path(path).relative_to(tmp_path).as_posix())
        return real(path, data, **kw)

    monkeypatch.setattr(documents_module, "atomic_write_bytes", recording)
    store = FileStore(tmp_path)
    store.put_run(make_run())
    store.update_run("demo-run-1", lambda r: setattr(r, "status", "waiting"))
    store.save_snapshot("demo-run-1", {"x": 1})
    store.put_review(make_review())
    store.update_review("demo-1", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    store.update_review("demo-1", lambda r: None)  # no change: no write
    request = store.enqueue_request("run", {})
    store.add_task(make_task())
    store.record_delivery("X-GitHub-Delivery 1")
    store.update_run("demo-run-1", lambda r: setattr(r, "status", "completed"))
    archived = "archive/runs/20250106090000000000~demo-run-1.json"
    assert written[:7] == [
        "runs/demo-run-1.json",
        "runs/demo-run-1.json",
        "snapshots/demo-run-1.json",
        "reviews/demo-1.json",
        "reviews/demo-1.json",
        "counters/request.json",
        f"inbox/{request}.json",
    ]
    assert written[7] == "outbox/demo-1.post.slack-C0123.json" and written[8].startswith("deliveries/")
    assert written[9:] == [archived]
    documents = [p for p in tmp_path.rglob("*") if p.is_file() and not p.name.startswith(".")]
    left = sorted(set(written) - {"runs/demo-run-1.json"})  # the ended run moved to the archive
    assert sorted(p.relative_to(tmp_path).as_posix() for p in documents) == left


def test_reading_creates_nothing(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "state")
    assert store.list_runs() == [] and store.list_reviews() == [] and store.take_requests() == []
    with pytest.raises(UnknownReviewError):
        store.update_review("demo-1", lambda r: None)
    assert store.open_reviews() == store.decided_reviews() == store.due_reviews(T0) == [] and store.problems() == []
    assert store.next_deadline() is None and store.review_for_run("demo-run-1") is None
    assert store.active_runs() == store.recent_runs() == [] and store.active_run("demo") is None
    assert store.run_with_trigger("cli") is None and store.load_state("demo-run-1") is None
    assert store.counts() == {"runs": {}, "open_reviews": 0, "decided_reviews": 0, "outbox_pending": 0}
    assert store.due_tasks("slack", T0) == store.pending_tasks() == [] and store.next_task_at("slack") is None
    with pytest.raises(UnknownTaskError):
        store.update_task("a.post", lambda t: None)
    assert not (tmp_path / "state").exists()
