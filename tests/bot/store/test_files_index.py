"""FileStore's in-process index: no listing while nothing changed, own writes applied, others' noticed.

The index keeps summaries, not documents: a query reads the documents it
returns. An unchanged directory mtime is trusted when it was already old
when seen, or when the kind's write count did not move; tests age
directories with ``os.utime`` or pass a ``wall`` clock instead of sleeping.
"""

from __future__ import annotations

import errno
import gc
import os
import threading
import time
import weakref
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.reviews import Vote, cast_vote, mark_applied
from bot.store import FileStore, UnknownReviewError
from bot.store.documents import locked
from bot.store.watch import bump_count
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


def listed_at_old_mtimes(root: Path) -> FileStore:
    """A filled store whose index listed its directories after they aged: no second look is due."""
    store = FileStore(root)
    fill(store)
    tick(store)
    age(root)
    tick(store)
    return store


def scans(store: FileStore) -> list[int]:
    """How often each directory was listed (hot and archive of reviews and runs, the outbox)."""
    return [store._reviews.hot.scans, store._runs.hot.scans, store._outbox.hot.scans,
            store._reviews.archive.scans, store._runs.archive.scans]


def idle_tick(store: FileStore) -> Any:
    """What serve's tick, /healthz and the outbox workers ask while nothing is to do."""
    return (
        store.counts(),
        store.next_deadline(),
        store.next_task_at("slack"),
        store.problems(),
        store.due_reviews(T0 - timedelta(days=1)),
        store.due_tasks("github", T0),
        store.active_run("other"),
        store.run_with_trigger("nothing"),
    )


def test_an_idle_tick_reads_no_file_and_lists_no_directory(tmp_path: Path, reads: list[str]) -> None:
    store = FileStore(tmp_path)
    fill(store)
    first = tick(store), idle_tick(store)
    age(tmp_path)
    assert (tick(store), idle_tick(store)) == first  # the mtimes moved: listed once, every file unchanged
    before = scans(store)
    reads.clear()
    for _ in range(3):
        assert idle_tick(store) == first[1]
    assert reads == []
    assert scans(store) == before


def test_a_query_reads_the_documents_it_returns_and_no_other(tmp_path: Path, reads: list[str]) -> None:
    store = listed_at_old_mtimes(tmp_path)
    before = scans(store)
    reads.clear()
    assert [r.id for r in store.open_reviews()] == ["demo-2", "demo-3", "demo-4", "demo-5"]
    assert sorted(reads) == ["demo-2.json", "demo-3.json", "demo-4.json", "demo-5.json"]
    reads.clear()
    assert store.active_run("demo") is not None and reads == ["demo-run-1.json"]
    assert scans(store) == before


def test_a_first_listing_reads_each_document_once(tmp_path: Path, reads: list[str]) -> None:
    """``status`` in a fresh process: the records the listing read are the ones returned, not read again."""
    fill(FileStore(tmp_path))
    store = FileStore(tmp_path)
    reads.clear()
    assert len(store.list_reviews()) == 5 and len(store.list_runs()) == 5 and len(store.pending_tasks()) == 5
    assert sorted(reads) == sorted(
        [f"demo-{i}.json" for i in range(1, 6)] + [f"demo-run-{i}.json" for i in range(1, 6)]
        + [f"demo-{i}.post.json" for i in range(1, 6)]
    )


def test_an_own_write_is_seen_without_listing_or_reading(tmp_path: Path, reads: list[str]) -> None:
    store = listed_at_old_mtimes(tmp_path)
    before = scans(store)
    store.update_review("demo-2", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    reads.clear()  # the update itself reads the document it changes
    assert [r.id for r in store.decided_reviews()] == ["demo-1", "demo-2"]
    assert sorted(reads) == ["demo-1.json", "demo-2.json"]  # the two returned
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))  # archived: moved to the archive
    store.update_run("demo-run-1", lambda r: setattr(r, "status", "completed"))
    assert [r.id for r in store.decided_reviews()] == ["demo-2"] and store.counts()["decided_reviews"] == 1
    assert store.review_for_run("demo-run-1", "checkpoint_0001") is not None
    assert [r.id for r in store.recent_runs()] == ["demo-run-1"]
    assert store.get_review("demo-1").status == "applied"
    assert [r.id for r in store.active_runs()] == [f"demo-run-{i}" for i in range(2, 6)]
    assert scans(store) == before  # neither the hot directories nor the archives were listed again


def test_own_writes_leave_the_index_as_a_listing_would(tmp_path: Path) -> None:
    store = listed_at_old_mtimes(tmp_path)
    before = scans(store)
    approve = Vote("local:a", HumanDecision.APPROVE)
    store.update_review("demo-4", lambda r: cast_vote(r, approve, now=T0))
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    store.update_review("demo-4", lambda r: mark_applied(r, now=T0))
    store.put_review(make_review("demo-6", created_at=T0 - timedelta(days=1)))
    store.update_run("demo-run-2", lambda r: setattr(r, "status", "completed"))
    store.put_run(make_run("demo-run-6", status="waiting"))
    store.finish_task("demo-3.post")
    store.add_task(make_task("demo-6.post", created_at=T0))
    store.update_task("demo-2.post", lambda t: setattr(t, "attempts", 3))
    assert scans(store) == before  # every change above was applied, none listed
    fresh = FileStore(tmp_path)
    for mine, listed in zip((store._reviews, store._runs, store._outbox), (fresh._reviews, fresh._runs, fresh._outbox),
                            strict=True):
        assert dict(mine.hot.current()[1]) == dict(listed.hot.current()[1])
        assert mine.archived() == listed.archived()


def test_a_query_waits_for_this_process_write_under_way_instead_of_listing(tmp_path: Path) -> None:
    """The write moves the mtime before it updates the index: a listing in between would be wasted."""
    answers: list[list[str]] = []

    class Interleaved(FileStore):
        armed = False
        asker: threading.Thread | None = None

        def _write(self, path: Path, document: Any) -> None:
            super()._write(path, document)
            if self.armed and self.asker is None:
                self.asker = threading.Thread(target=lambda: answers.append([r.id for r in self.decided_reviews()]))
                self.asker.start()
                self.asker.join(0.2)
                assert self.asker.is_alive()  # waiting for this write, not listing the changed directory

    store = Interleaved(tmp_path)
    fill(store)
    age(tmp_path)
    tick(store)
    before = scans(store)
    store.armed = True
    store.update_review("demo-2", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    assert store.asker is not None
    store.asker.join(10)
    assert answers == [["demo-1", "demo-2"]] and scans(store) == before


def test_the_index_keeps_small_summaries_not_documents(tmp_path: Path) -> None:
    """Memory grows with a few fields per document: no bytes, no record, no container of the document."""
    store = FileStore(tmp_path)
    fill(store)
    tick(store)
    store.update_review("demo-3", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))

    def leaves(value: Any) -> list[Any]:
        return [leaf for item in value for leaf in leaves(item)] if isinstance(value, tuple) else [value]

    for kind in (store._reviews, store._runs, store._outbox):
        _, entries = kind.hot.current()
        assert len(entries) == 5
        for entry in entries.values():
            assert type(entry).__slots__ == ("key", "summary") and not hasattr(entry, "__dict__")
            assert isinstance(entry.summary, tuple)
            kinds = {type(leaf) for leaf in leaves(entry.summary)}
            assert kinds <= {str, int, bool, datetime, type(None)}, kinds


def test_a_store_let_go_is_freed_at_once_without_the_cycle_collector(tmp_path: Path) -> None:
    """No reference cycles: 20,000 index entries need no collection that walks them all (status's last 40 ms)."""
    store = FileStore(tmp_path)
    fill(store)
    tick(store)
    freed = [weakref.ref(store), weakref.ref(store._reviews), weakref.ref(store._reviews.hot)]
    gc.disable()
    try:
        del store
        assert [ref() for ref in freed] == [None, None, None]
    finally:
        gc.enable()


def test_another_process_writes_are_noticed(tmp_path: Path) -> None:
    serve, decide = FileStore(tmp_path), FileStore(tmp_path)  # two processes: two indexes
    fill(serve)
    age(tmp_path)
    assert [r.id for r in serve.decided_reviews()] == ["demo-1"]
    decide.update_review("demo-3", lambda r: cast_vote(r, Vote("local:b", HumanDecision.APPROVE), now=T0))
    assert [r.id for r in serve.decided_reviews()] == ["demo-1", "demo-3"]
    decide.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    assert [r.id for r in serve.decided_reviews()] == ["demo-3"] and serve.counts()["decided_reviews"] == 1
    assert serve.get_review("demo-1").status == "applied"


def test_another_process_write_in_the_tick_of_an_own_write_is_noticed(tmp_path: Path) -> None:
    """The kernel stamps both writes alike; the write count in the lock file tells them apart."""
    serve, decide = FileStore(tmp_path), FileStore(tmp_path)
    fill(serve)
    serve.decided_reviews()
    serve.update_review("demo-2", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    reviews = tmp_path / "reviews"
    mtime = reviews.stat().st_mtime_ns
    decide.update_review("demo-4", lambda r: cast_vote(r, Vote("local:b", HumanDecision.APPROVE), now=T0))
    os.utime(reviews, ns=(mtime, mtime))  # as if in the same coarse tick as serve's own write
    assert [r.id for r in serve.decided_reviews()] == ["demo-1", "demo-2", "demo-4"]


def test_a_write_counted_elsewhere_lists_no_directory_whose_old_mtime_did_not_move(tmp_path: Path) -> None:
    serve = FileStore(tmp_path)
    fill(serve)
    age(tmp_path)
    idle_tick(serve)
    before = scans(serve)
    with locked(tmp_path / "reviews") as fd:  # a write another process made in the archive, say
        bump_count(fd)
    assert idle_tick(serve)[0]["decided_reviews"] == 1
    assert scans(serve) == before


def test_a_write_that_fails_half_way_makes_the_index_list_again(tmp_path: Path) -> None:
    class DiskGone(FileStore):
        failing = False

        def _write(self, path: Path, document: Any) -> None:
            super()._write(path, document)
            if self.failing:
                raise OSError(errno.EIO, "the disk went away after the rename")

    store = DiskGone(tmp_path)
    fill(store)
    age(tmp_path)
    tick(store)
    before = store._reviews.hot.scans
    store.failing = True
    with pytest.raises(OSError, match="went away"):
        store.update_review("demo-2", lambda r: cast_vote(r, Vote("local:a", HumanDecision.APPROVE), now=T0))
    store.failing = False
    assert [r.id for r in store.decided_reviews()] == ["demo-1", "demo-2"]
    assert store._reviews.hot.scans == before + 1


@pytest.mark.parametrize(
    ("whole_seconds", "young"),
    [(False, 0.01), (True, 0.5)],  # sub-second timestamps: a kernel tick; whole seconds: two seconds
    ids=["fine-timestamps", "whole-second-timestamps"],
)
def test_another_process_write_in_the_tick_of_a_listing_is_noticed(
    tmp_path: Path, whole_seconds: bool, young: float
) -> None:
    """A write in the same clock tick as a listing leaves the mtime as it was: the write count tells."""
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
    assert serve.open_reviews() == []  # noticed: the count moved, and the mtime was young when listed
    scans = serve._reviews.hot.scans
    now[0] = mtime / 1e9 + 10
    serve.open_reviews()
    serve.open_reviews()
    assert serve._reviews.hot.scans == scans  # a counted write needs no second look once the mtime is old


@pytest.mark.parametrize("whole_seconds", [False, True], ids=["fine-timestamps", "whole-second-timestamps"])
def test_a_hand_made_change_in_the_tick_of_a_listing_is_seen_once_the_mtime_settled(
    tmp_path: Path, whole_seconds: bool
) -> None:
    """A person adding a file takes no lock and counts no write: only the mtime tells, once it is old."""
    directory = tmp_path / "reviews"
    now = [0.0]
    serve = FileStore(tmp_path, wall=lambda: now[0])
    fill(serve, 2)
    mtime = directory.stat().st_mtime_ns
    mtime = mtime - mtime % 1_000_000_000 + (0 if whole_seconds else 123_000_000)
    os.utime(directory, ns=(mtime, mtime))
    now[0] = mtime / 1e9 + 0.01
    assert [r.id for r in serve.open_reviews()] == ["demo-2"]
    copy = (directory / "demo-2.json").read_bytes().replace(b'"demo-2"', b'"demo-6"')
    (directory / "demo-6.json").write_bytes(copy)
    os.utime(directory, ns=(mtime, mtime))  # in the same coarse tick as the listing
    now[0] = mtime / 1e9 + 10
    assert [r.id for r in serve.open_reviews()] == ["demo-2", "demo-6"]
    scans = serve._reviews.hot.scans
    serve.open_reviews()
    assert serve._reviews.hot.scans == scans  # listed once more, then trusted


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
