"""Counted votes go to ``reviews/votes.jsonl`` in one append per batch; every reader sees them folded in."""

from __future__ import annotations

import logging
import random
import signal
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from bot.reviews import Reviewers, Vote, cast_votes, mark_applied
from bot.store import FileStore
from bot.store.base import cast_each
from bot.store.vote_journal import VoteJournal
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review

VOTERS = [f"local:v{n}" for n in range(6)]
REPO = Path(__file__).resolve().parents[3]


def journal_of(store: FileStore) -> Path:
    return store.root / "reviews" / "votes.jsonl"


def new_store(root: Path, reviews: int = 2, required: int = 9) -> FileStore:
    store = FileStore(root)
    for n in range(1, reviews + 1):
        review = make_review(f"demo-{n}", created_at=T0 + timedelta(minutes=n))
        review.policy.approvals_required = required
        review.policy.reviewers = Reviewers(local=[v.split(":")[1] for v in VOTERS[:-1]])  # the last one may not
        store.put_review(review)
    return store


def approve(voter: str, key: str | None, minute: int = 0) -> Vote:
    return Vote(voter, HumanDecision.APPROVE, at=T0 + timedelta(minutes=minute), delivery_key=key)


def test_counted_votes_are_appended_and_the_documents_stay_as_they_were(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state")
    documents = {p.name: p.read_bytes() for p in (store.root / "reviews").glob("*.json")}
    results = store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None), (approve("local:v1", "k1"), None)],
                                "demo-2": [(approve("local:v0", "k2"), None)]})
    assert [r.message for r in results["demo-1"]] == ["approve from local:v0 recorded: 1 of 9 needed",
                                                      "approve from local:v1 recorded: 2 of 9 needed"]
    assert {p.name: p.read_bytes() for p in (store.root / "reviews").glob("*.json")} == documents
    assert len(journal_of(store).read_bytes().splitlines()) == 1 + 3  # the header and one line per vote
    other = FileStore(store.root)  # another process: reads the documents and folds the lines in
    assert [v.voter for v in other.get_review("demo-1").votes] == ["local:v0", "local:v1"]
    assert other.get_review("demo-2").delivery_keys == ["k2"]
    assert [len(r.votes) for r in other.open_reviews()] == [2, 1]
    assert [len(r.history) for r in other.list_reviews()] == [2, 1]


def test_a_journaled_store_ends_where_one_update_per_vote_ends(tmp_path: Path) -> None:
    """Random batches (repeats, rejects, pauses, modifies, refusals, duplicates, votes without a key)."""
    rng = random.Random(7)
    for scenario in range(25):
        journaled = new_store(tmp_path / f"j{scenario}", required=rng.randint(2, 4))
        journaled._reviews.compact_at = rng.choice([3, 10, 1000])
        reference = FileStore(tmp_path / f"r{scenario}")
        for review in journaled.list_reviews():
            reference.put_review(review)
        minute = 0
        for _batch in range(rng.randint(1, 6)):
            batch: dict[str, list[tuple[Vote, str | None]]] = {}
            for _ in range(rng.randint(1, 5)):
                minute += 1
                voter = rng.choice(VOTERS)
                decision = rng.choice([HumanDecision.APPROVE] * 5 + [HumanDecision.REJECT, HumanDecision.PAUSE,
                                                                     HumanDecision.MODIFY])
                key = rng.choice([None, f"k{rng.randint(0, 12)}"]) if rng.random() < 0.3 else f"k{minute}"
                vote = Vote(voter, decision, feedback="why" if decision is HumanDecision.REJECT else "",
                            modifications={"context": {"limit": 5}} if decision is HumanDecision.MODIFY else {},
                            at=T0 + timedelta(minutes=minute), delivery_key=key)
                refusal = "not a reviewer" if voter == VOTERS[-1] else None
                batch.setdefault(rng.choice(["demo-1", "demo-2"]), []).append((vote, refusal))
            got = journaled.cast_votes(batch)
            want = cast_each(reference, batch)
            assert {k: [(r.kind, r.message) for r in v] for k, v in got.items()} == \
                   {k: [(r.kind, r.message) for r in v] for k, v in want.items()}, f"scenario {scenario}"
        for review_id in ("demo-1", "demo-2"):
            expected = reference.get_review(review_id).to_dict()
            assert journaled.get_review(review_id).to_dict() == expected, f"scenario {scenario}"
            assert FileStore(journaled.root).get_review(review_id).to_dict() == expected, f"scenario {scenario}"


def test_a_long_journal_is_folded_into_the_documents_and_started_afresh(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", required=50)
    store._reviews.compact_at = 5
    for n in range(12):
        store.cast_votes({f"demo-{n % 2 + 1}": [(approve(f"local:v{n % 5}", f"k{n}", n), None)]})
    lines = journal_of(store).read_bytes().splitlines()
    assert len(lines) == 1 + 2  # compacted after the 5th and the 10th vote
    on_disk = FileStore(store.root)
    on_disk._reviews.journal.refresh()
    assert sorted(on_disk._reviews.journal.stems()) == ["demo-1", "demo-2"]
    documents = {r.id: len(r.delivery_keys) for r in on_disk._reviews.archived_records() + [
        on_disk._reviews.decode(p, p.read_bytes()) for p in sorted((store.root / "reviews").glob("*.json"))]}
    assert documents == {"demo-1": 5, "demo-2": 5}  # the first ten, in the documents themselves
    assert [len(on_disk.get_review(i).delivery_keys) for i in ("demo-1", "demo-2")] == [6, 6]


def test_lines_a_document_already_holds_fold_to_nothing(tmp_path: Path) -> None:
    """A crash after compaction wrote the documents and before it started a new journal."""
    store = new_store(tmp_path / "state")
    store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None), (approve("local:v1", "k1"), None)]})
    folded = store.get_review("demo-1")
    store.put_review(folded)  # the document now holds both votes; the journal still has their lines
    again = FileStore(store.root).get_review("demo-1")
    assert [v.voter for v in again.history] == ["local:v0", "local:v1"] and again.delivery_keys == ["k0", "k1"]


def test_a_vote_that_changes_more_than_the_trail_writes_the_document(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", required=2)
    store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None)]})
    results = store.cast_votes({"demo-1": [(approve("local:v1", "k1"), None)],
                                "demo-2": [(replace(approve("local:v1", "k2"), decision=HumanDecision.PAUSE,
                                                    modifications={"until": "2h"}), None)]})
    assert results["demo-1"][0].outcome is not None
    documents = FileStore(store.root)._reviews
    for review_id in ("demo-1", "demo-2"):
        path = store.root / "reviews" / f"{review_id}.json"
        document = documents.decode(path, path.read_bytes())  # no journal lines folded in
        assert document.to_dict() == store.get_review(review_id).to_dict()


def test_a_failed_append_fails_the_journaled_reviews_only_and_keeps_nothing_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_store(tmp_path / "state", required=2)
    store.cast_votes({"demo-2": [(approve("local:v0", "k0"), None)]})

    def full(self: VoteJournal, entries: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(VoteJournal, "append", full)
        results = store.cast_votes({"demo-1": [(approve("local:v0", "k1"), None)],
                                    "demo-2": [(approve("local:v1", "k2"), None)]})  # decides: no journal line
    assert isinstance(results["demo-1"], OSError)
    assert results["demo-2"][0].outcome is not None
    assert store.get_review("demo-1").votes == []  # not kept in memory either
    assert store.cast_votes({"demo-1": [(approve("local:v0", "k1"), None)]})["demo-1"][0].accepted


def test_a_line_cut_short_is_dropped_and_a_damaged_line_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(tmp_path / "state")
    store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None)]})
    path = journal_of(store)
    with open(path, "ab") as handle:
        handle.write(b'not json\n{"review": "demo-1", "vote": {"voter": "local:v1", "deci')  # a crash mid-append
    with caplog.at_level(logging.ERROR, logger="bot.store.files"):
        assert [v.voter for v in FileStore(store.root).get_review("demo-1").votes] == ["local:v0"]
    assert f"{path} line 3: damaged vote line" in caplog.text
    store.cast_votes({"demo-1": [(approve("local:v2", "k2"), None)]})  # the cut line goes, the new one stays
    assert not path.read_bytes().endswith(b'"deci')
    assert [v.voter for v in FileStore(store.root).get_review("demo-1").votes] == ["local:v0", "local:v2"]


def test_a_reader_of_an_older_journal_reads_the_new_one_afresh(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", required=50)
    store._reviews.compact_at = 3
    reader = FileStore(store.root)
    for n in range(5):
        store.cast_votes({"demo-1": [(approve(f"local:v{n}", f"k{n}", n), None)]})
        assert [v.delivery_key for v in reader.get_review("demo-1").history] == [f"k{i}" for i in range(n + 1)]


def test_cast_votes_is_what_cast_vote_does(tmp_path: Path) -> None:
    review = make_review("demo-1")
    review.policy.approvals_required = 2
    results, lines = cast_votes(review, [(approve("local:a", "k"), None), (approve("local:a", "k"), None)])
    assert [r.kind for r in results] == ["counted", "duplicate"]
    assert lines == [approve("local:a", "k").to_dict()]
    review = make_review("demo-2")
    review.policy.approvals_required = 2
    _, lines = cast_votes(review, [(approve("local:a", None), None)])
    assert lines is None  # no delivery key: a replay could not tell it was folded already


def test_kill9_while_casting_loses_no_acknowledged_vote_and_counts_none_twice(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", required=10_000)
    rng = random.Random()
    acknowledged: list[str] = []
    first = 0
    for _round in range(8):
        child = subprocess.Popen([sys.executable, "-m", "tests.bot.store.journal_child", str(store.root), str(first)],
                                 cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None
            for _ in range(rng.randint(1, 40)):
                acknowledged += child.stdout.readline().split()
            child.send_signal(signal.SIGKILL)  # mid-batch, mid-append or mid-compaction: wherever it is now
            acknowledged += child.stdout.read().split()  # told before it died
            assert child.wait(10) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
        first = int(acknowledged[-1][1:]) + 100  # past anything the killed child may have cast untold
    reviews = [FileStore(store.root).get_review(review_id) for review_id in ("demo-1", "demo-2")]
    keys = [key for review in reviews for key in review.delivery_keys]
    assert len(keys) == len(set(keys)), "a vote counted twice"
    assert set(acknowledged) <= set(keys), f"lost: {sorted(set(acknowledged) - set(keys))[:5]}"
    for review in reviews:
        assert [v.delivery_key for v in review.history] == review.delivery_keys


def test_a_late_vote_on_an_archived_review_writes_nothing(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", required=1)
    store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None)]})
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))  # applied: archived
    files = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()}
    late = store.cast_votes({"demo-1": [(approve("local:v1", "k1"), None)]})["demo-1"]
    assert [r.kind for r in late] == ["already_decided"]
    assert {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()} == files


def test_a_long_journal_folds_a_few_reviews_at_a_time_the_busiest_first(tmp_path: Path) -> None:
    store = new_store(tmp_path / "state", reviews=3, required=50)
    store._reviews.compact_at, store._reviews.fold_at_once = 6, 1
    counts = {"demo-1": 1, "demo-2": 3, "demo-3": 2}  # six lines: demo-2 has the most
    n = 0
    for review_id, count in counts.items():
        for _ in range(count):
            store.cast_votes({review_id: [(approve(f"local:v{n % 5}", f"k{n}", n), None)]})
            n += 1
    on_disk = FileStore(store.root)._reviews
    on_disk.journal.refresh()
    assert sorted(on_disk.journal.stems()) == ["demo-1", "demo-3"] and len(on_disk.journal) == 3
    path = store.root / "reviews" / "demo-2.json"
    assert len(on_disk.decode(path, path.read_bytes()).delivery_keys) == 3  # its lines are in its document
    assert {r.id: len(r.delivery_keys) for r in FileStore(store.root).open_reviews()} == counts


def test_a_fold_that_fails_leaves_the_votes_recorded_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store(tmp_path / "state", required=50)
    store._reviews.compact_at = 2
    real = VoteJournal.drop

    def full(self: VoteJournal, stems: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(VoteJournal, "drop", full)
    with caplog.at_level(logging.WARNING, logger="bot.store.files"):
        results = store.cast_votes({"demo-1": [(approve("local:v0", "k0"), None), (approve("local:v1", "k1"), None)]})
    assert [r.accepted for r in results["demo-1"]] == [True, True]  # told: the lines are durable
    assert "could not fold vote lines" in caplog.text
    monkeypatch.setattr(VoteJournal, "drop", real)
    store.cast_votes({"demo-1": [(approve("local:v2", "k2"), None)]})
    assert len(journal_of(store).read_bytes().splitlines()) == 1  # folded now: the header alone
    assert FileStore(store.root).get_review("demo-1").delivery_keys == ["k0", "k1", "k2"]


def test_serve_and_a_cli_process_take_turns_on_one_review(tmp_path: Path) -> None:
    """Slack votes journaled by serve, a `loopbot decide` from another process in between: all count, in order."""
    serve = new_store(tmp_path / "state", required=4)
    cli = FileStore(serve.root)
    serve.cast_votes({"demo-1": [(approve("local:v0", "k0", 1), None)]})
    assert cli.cast_votes({"demo-1": [(approve("local:v1", None, 2), None)]})["demo-1"][0].accepted  # written
    serve.cast_votes({"demo-1": [(approve("local:v2", "k2", 3), None)]})
    last = cli.cast_votes({"demo-1": [(approve("local:v3", "k3", 4), None)]})["demo-1"][0]
    assert last.outcome is not None and last.message.startswith("decided: approve by local:v0, local:v1, local:v2")
    for reader in (serve, cli, FileStore(serve.root)):
        assert [v.voter for v in reader.get_review("demo-1").history] == [f"local:v{n}" for n in range(4)]
