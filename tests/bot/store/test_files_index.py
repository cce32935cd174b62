"""FileStore's in-process index: no file read while nothing changed, other processes' writes noticed.

The index trusts an unchanged directory mtime only when that mtime was
already old at the last scan; tests age directories with ``os.utime`` or
pass a ``wall`` clock instead of sleeping.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.reviews import Vote, cast_vote, mark_applied
from bot.store import FileStore, UnknownReviewError
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review, make_run, make_task

DIRS = ("reviews", "runs", "outbox", "archive/reviews", "archive/runs")


def age(root: Path, seconds: float = 60.0) -> None:
    """Make the directories look untouched for a while (as after an idle minute)."""
    past = time.time() - seconds
    for name in DIRS:
        if (root / name).is_dir():
            os.utime(root / name, (past, past))


def fill(store: FileStore, n: int = 5) -> None:
    for i in range(1, n + 1):
        review = make_review(f"demo-{i}", created_at=T0 + timedelta(minutes=i))
        store.put_review(review)
        store.put_run(make_run(f"demo-run-{i}", status="waiting"))
        store.add_task(make_task(f"demo-{i}.post", created_at=T0))
    store.update_review("demo-1", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))


def tick(store: FileStore) -> Any:
    """The questions serve, /healthz and status ask again and again."""
    return (
        [r.id for r in store.open_reviews()],
        [r.id for r in store.decided_reviews()],
        [r.id for r in store.due_reviews(T0 + timedelta(days=9))],
        store.next_deadline(),
        store.counts(),
        [r.id for r in store.active_runs()],
        store.active_run("demo"),
        [t.id for t in store.due_tasks("slack", T0)],
        store.next_task_at("slack"),
        store.problems(),
    )


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file read through Path.read_bytes (how the store reads documents)."""
    seen: list[str] = []
    real = Path.read_bytes

    def counting(self: Path) -> bytes:
        seen.append(self.name)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    return seen


def test_the_tick_reads_no_file_and_lists_no_directory_while_nothing_changed(tmp_path: Path, reads: list[str]) -> None:
    store = FileStore(tmp_path)
    fill(store)
    reads.clear()
    first = tick(store)
    assert reads.count("demo-2.json") == 1  # the first scan reads each document once
    reads.clear()
    age(tmp_path)
    assert tick(store) == first
    assert reads == []  # a rescan (the mtime moved) re-reads nothing: every file is unchanged
    scans = [store._reviews.hot.scans, store._runs.hot.scans, store._outbox.hot.scans]
    reads.clear()
    for _ in range(3):
        assert tick(store) == first
    assert reads == []
    assert [store._reviews.hot.scans, store._runs.hot.scans, store._outbox.hot.scans] == scans


def test_a_write_rereads_only_the_changed_file(tmp_path: Path, reads: list[str]) -> None:
    store = FileStore(tmp_path)
    fill(store)
    tick(store)
    age(tmp_path)
    tick(store)
    reads.clear()
    store.update_review("demo-2", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    reads.clear()  # the update itself reads the document it changes
    assert [r.id for r in store.decided_reviews()] == ["demo-1", "demo-2"]
    assert reads == ["demo-2.json"]


def test_another_process_writes_are_noticed(tmp_path: Path) -> None:
    serve, decide = FileStore(tmp_path), FileStore(tmp_path)  # two processes: two indexes
    fill(serve)
    age(tmp_path)
    assert [r.id for r in serve.decided_reviews()] == ["demo-1"]
    decide.update_review("demo-3", lambda r: cast_vote(r, Vote("local:b", HumanDecision.APPROVE), now=T0))
    assert [r.id for r in serve.decided_reviews()] == ["demo-1", "demo-3"]
    decide.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    assert [r.id for r in serve.decided_reviews()] == ["demo-3"] and serve.counts()["decided_reviews"] == 1


@pytest.mark.parametrize(
    ("whole_seconds", "young"),
    [(False, 0.01), (True, 0.5)],  # sub-second timestamps: a kernel tick; whole seconds: two seconds
    ids=["fine-timestamps", "whole-second-timestamps"],
)
def test_a_young_directory_mtime_is_not_trusted(tmp_path: Path, whole_seconds: bool, young: float) -> None:
    """A write in the same clock tick as a scan leaves the mtime as it was: rescan until it is old."""
    directory = tmp_path / "reviews"
    now = [0.0]
    serve, decide = FileStore(tmp_path, wall=lambda: now[0]), FileStore(tmp_path)
    fill(serve, 2)
    mtime = directory.stat().st_mtime_ns
    mtime = mtime - mtime % 1_000_000_000 + (0 if whole_seconds else 123_000_000)
    os.utime(directory, ns=(mtime, mtime))
    now[0] = mtime / 1e9 + young  # scanned just after the last change: too young to trust
    assert [r.id for r in serve.open_reviews()] == ["demo-2"]
    decide.update_review("demo-2", lambda r: cast_vote(r, Vote("local:b", HumanDecision.APPROVE), now=T0))
    os.utime(directory, ns=(mtime, mtime))  # as if the write landed in the same coarse tick
    assert serve.open_reviews() == []  # noticed: the mtime had not been trusted
    scans = serve._reviews.hot.scans
    now[0] = mtime / 1e9 + 10  # long after: this scan's result is trusted ...
    serve.open_reviews()
    serve.open_reviews()
    assert serve._reviews.hot.scans == scans + 1  # ... so the next question does not list the directory


def test_a_crash_between_archive_copy_and_removal_leaves_the_archive_copy_winning(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_review(make_review())
    store.update_review("demo-1", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    hot = tmp_path / "reviews" / "demo-1.json"
    decided = hot.read_bytes()
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    hot.write_bytes(decided)  # the hot copy the crash left behind
    other = FileStore(tmp_path)
    assert other.decided_reviews() == [] and other.get_review("demo-1").status == "applied"
    assert not hot.exists()
    assert [r.id for r in other.list_reviews(archived=True)] == ["demo-1"]


def test_ended_runs_of_an_older_state_dir_are_archived_on_the_first_scan(tmp_path: Path) -> None:
    old = FileStore(tmp_path)
    old.put_run(make_run("demo-run-1", status="waiting"))
    (tmp_path / "runs" / "demo-run-2.json").write_bytes(
        (tmp_path / "runs" / "demo-run-1.json").read_bytes().replace(b"demo-run-1", b"demo-run-2").replace(
            b'"waiting"', b'"completed"'
        )
    )
    store = FileStore(tmp_path)
    assert [r.id for r in store.list_runs()] == ["demo-run-1"]
    assert not (tmp_path / "runs" / "demo-run-2.json").exists()
    assert [r.id for r in store.recent_runs()] == ["demo-run-2"] and store.get_run("demo-run-2").status == "completed"


def test_queries_from_many_threads_while_another_writes(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    fill(store, 3)
    errors: list[BaseException] = []
    stop = threading.Event()

    def ask() -> None:
        try:
            while not stop.is_set():
                tick(store)
                assert {r.id for r in store.list_reviews()} >= {"demo-2", "demo-3"}
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    askers = [threading.Thread(target=ask) for _ in range(4)]
    for thread in askers:
        thread.start()
    for i in range(4, 40):
        store.put_review(make_review(f"demo-{i}"))
        store.update_review(f"demo-{i}", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
        store.update_review(f"demo-{i}", lambda r: mark_applied(r, now=T0))
    stop.set()
    for thread in askers:
        thread.join(timeout=60)
    assert errors == []
    assert len(store.list_reviews(archived=True)) == 39 and store.counts()["open_reviews"] == 2


def test_did_you_mean_over_many_ids_offers_those_one_edit_away(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.store.files as files_module

    monkeypatch.setattr(files_module, "_FEW_IDS", 2)  # as with 20,000 reviews, without writing them
    store = FileStore(tmp_path)
    for review_id in ("triage-17", "triage-18", "demo-3"):
        store.put_review(make_review(review_id))
    with pytest.raises(UnknownReviewError, match='did you mean "triage-17"'):
        store.get_review("triage-71")
    with pytest.raises(UnknownReviewError, match="status` lists the open reviews"):
        store.get_review("nothing-like-it")
