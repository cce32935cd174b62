"""An update reuses the record this process wrote last, and reads again whenever anything else wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.reviews import Vote, cast_vote
from bot.store import FileStore
from bot.store.recent import RecentWrites
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review


def vote(store: FileStore, voter: str, key: str | None = None) -> None:
    store.update_review("demo-1", lambda r: cast_vote(
        r, Vote(f"local:{voter}", HumanDecision.APPROVE, delivery_key=key), now=T0))


def voters(store: FileStore) -> list[str]:
    return [v.voter for v in store.get_review("demo-1").history]


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    store = FileStore(tmp_path / "state")
    review = make_review("demo-1")
    review.policy.approvals_required = 9
    store.put_review(review)
    vote(store, "a")  # the first update reads the file; this one is kept
    return store


def test_an_update_after_an_own_update_reads_nothing(store: FileStore, reads: list[str]) -> None:
    vote(store, "b")
    vote(store, "c", key="k-c")
    assert reads == []
    assert voters(FileStore(store.root)) == ["local:a", "local:b", "local:c"]  # all of it on disk
    assert FileStore(store.root).get_review("demo-1").delivery_keys == ["k-c"]


def test_another_process_write_is_read_before_the_next_update(store: FileStore, reads: list[str]) -> None:
    vote(FileStore(store.root), "other")  # counted in the kind's lock file
    vote(store, "b")
    assert "demo-1.json" in reads
    assert voters(store) == ["local:a", "local:other", "local:b"]


def test_a_hand_edit_is_read_before_the_next_update(store: FileStore) -> None:
    path = store.root / "reviews" / "demo-1.json"
    document = json.loads(path.read_text())
    document["request"]["proposed_action"] = "edited by hand"
    path.write_text(json.dumps(document))  # no lock, no count: only the file's stat key says it changed
    vote(store, "b")
    review = FileStore(store.root).get_review("demo-1")
    assert review.request["proposed_action"] == "edited by hand"
    assert [v.voter for v in review.history] == ["local:a", "local:b"]


def test_an_update_that_fails_half_way_leaves_nothing_half_done_behind(store: FileStore) -> None:
    def half(review):  # type: ignore[no-untyped-def]
        cast_vote(review, Vote("local:half", HumanDecision.APPROVE), now=T0)
        raise RuntimeError("mutate failed after changing the record")

    with pytest.raises(RuntimeError):
        store.update_review("demo-1", half)
    vote(store, "b")
    assert voters(store) == ["local:a", "local:b"]


def test_an_own_write_of_another_kind_of_change_is_not_taken_for_the_kept_record(store: FileStore) -> None:
    review = store.get_review("demo-1")
    review.request["proposed_action"] = "replaced"
    store.put_review(review)  # this process, but not through an update: the kept record is stale now
    vote(store, "b")
    assert store.get_review("demo-1").request["proposed_action"] == "replaced"


def test_kept_records_are_forgotten_when_another_process_counted_a_write_or_a_write_failed() -> None:
    recent: RecentWrites[str] = RecentWrites(size=2)
    recent.begin(0)
    recent.keep("a", 11, "record a")
    recent.end(1)
    recent.begin(1)  # nobody else wrote: the same stat key hands it back, once
    assert recent.take("a", 12) is None  # another key: the file changed
    recent.keep("a", 11, "record a")
    assert recent.take("a", 11) == "record a" and recent.take("a", 11) is None
    recent.keep("a", 11, "record a")
    recent.end(2)
    recent.begin(3)  # one write more than this process made: another process wrote the kind
    assert recent.take("a", 11) is None
    recent.keep("a", 11, "record a")
    recent.end(None)  # a write failed half-way
    recent.begin(4)
    assert recent.take("a", 11) is None


def test_only_the_latest_records_are_kept() -> None:
    recent: RecentWrites[str] = RecentWrites(size=2)
    recent.begin(0)
    for stem in "abc":
        recent.keep(stem, 1, stem)
    assert [recent.take(stem, 1) for stem in "abc"] == [None, "b", "c"]
