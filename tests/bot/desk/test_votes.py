"""The one vote path: every reply gets exactly one answer, and a deciding vote is applied at once."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from adapters.channel import Answer, AnswerKind, Identity, Reply
from adapters.commands import parse_command
from adapters.vote_batches import VoteBatches
from bot.desk import Authorizer, Decisions, ListMembership, People, VotePath
from bot.review_records import Reviewers
from bot.store import SqliteStore
from bot.store import CorruptDocumentError

from ..runtime_support import FakeClock, bench, db_execute, demo, wait_for
from .support import make_review

ALICE_LOCAL, ALICE_SLACK = Identity("local", "alice"), Identity("slack", "U0AAA", "alice")
BOB = Identity("local", "bob")
ALL = {"local": ListMembership("local"), "slack": ListMembership("slack"), "github": ListMembership("github")}


def path_for(
    tmp_path: Path, *, people: People | None = None, required: int = 1, people_names: list[str] | None = None,
    **reviewers: list[str],
) -> tuple[VotePath, SqliteStore, list[str]]:
    store = SqliteStore(tmp_path / "state")
    review = make_review(**reviewers, **({"people": people_names} if people_names else {}))
    review.policy.approvals_required = required
    review.posts = [{"channel": "slack", "data": {"channel": "C1", "ts": "2.0", "thread_ts": "1.0"},
                     "target": "slack:C1"}]
    store.put_review(review)
    applied: list[str] = []
    decisions = Decisions()
    decisions.subscribe(applied.append)
    votes = VotePath(store, Authorizer(ALL, people), clock=FakeClock(), people=people, decisions=decisions)
    return votes, store, applied


def reply(text: str, voter: Identity = ALICE_LOCAL, **kw: object) -> Reply:
    return Reply(voter, parse_command(text), **kw)  # type: ignore[arg-type]


def test_counted_then_decided_then_already_decided(tmp_path: Path) -> None:
    votes, store, applied = path_for(tmp_path, required=2, local=["alice", "bob"])
    first = votes.handle(reply("approve demo-1"))
    assert (first.kind, first.text) == (AnswerKind.COUNTED, "approve from local:alice recorded: 1 of 2 needed")
    assert applied == []
    second = votes.handle(reply("lgtm demo-1 ship it", BOB))
    assert second.kind is AnswerKind.DECIDED and second.text.startswith("decided: approve by local:alice, local:bob")
    assert applied == ["demo-1"]  # handed to the runner at once, no tick involved
    late = votes.handle(reply("reject demo-1 too late", BOB))
    assert late.kind is AnswerKind.ALREADY_DECIDED and "already decided by local:alice, local:bob" in late.text


def test_refused_says_why_and_who_may(tmp_path: Path) -> None:
    votes, store, applied = path_for(tmp_path, local=["bob"])
    answer = votes.handle(reply("approve demo-1"))
    assert answer.kind is AnswerKind.REFUSED and "review.reviewers.local: bob" in answer.text
    assert store.get_review("demo-1").votes == [] and applied == []


def test_a_redelivered_reply_is_counted_once(tmp_path: Path) -> None:
    votes, store, _ = path_for(tmp_path, required=2, local=["alice", "bob"])
    assert votes.handle(reply("approve demo-1", dedupe_key="delivery-7")).kind is AnswerKind.COUNTED
    again = votes.handle(reply("approve demo-1", dedupe_key="delivery-7"))
    assert again.kind is AnswerKind.DUPLICATE
    assert len(store.get_review("demo-1").votes) == 1


def test_unknown_review_gets_a_did_you_mean(tmp_path: Path) -> None:
    votes, _, _ = path_for(tmp_path)
    answer = votes.handle(reply("approve demo-7"))
    assert answer.kind is AnswerKind.UNKNOWN_REVIEW and "demo-1" in answer.text


def test_a_reply_in_the_reviews_thread_needs_no_id(tmp_path: Path) -> None:
    votes, _, applied = path_for(tmp_path)
    answer = votes.handle(reply("approve", ALICE_SLACK, context={"channel": "C1", "thread_ts": "1.0"}))
    assert answer.kind is AnswerKind.DECIDED and applied == ["demo-1"]
    elsewhere = votes.handle(reply("approve", ALICE_SLACK, context={"channel": "C9", "thread_ts": "1.0"}))
    assert elsewhere.kind is AnswerKind.UNKNOWN_REVIEW and "no review is open here" in elsewhere.text


def test_several_open_reviews_in_one_place_are_listed(tmp_path: Path) -> None:
    votes, store, _ = path_for(tmp_path)
    other = make_review("demo-2")
    other.posts = store.get_review("demo-1").posts
    store.put_review(other)
    answer = votes.handle(reply("approve", ALICE_SLACK, context={"channel": "C1", "thread_ts": "1.0"}))
    assert answer.kind is AnswerKind.UNKNOWN_REVIEW and "demo-1, demo-2" in answer.text


def test_help_status_and_bad_commands_are_answered_not_counted(tmp_path: Path) -> None:
    votes, store, _ = path_for(tmp_path, local=["alice"])
    assert votes.handle(reply("help")).kind is AnswerKind.INFO
    status = votes.handle(reply("status"))
    assert status.kind is AnswerKind.INFO and "demo-1" in status.text
    assert "no open review is waiting for you" in votes.handle(reply("status", BOB)).text
    bad = votes.handle(reply("aprove demo-1"))
    assert bad.kind is AnswerKind.INVALID and 'did you mean "approve"' in bad.text
    assert store.get_review("demo-1").votes == []


def test_a_voter_name_with_a_newline_is_refused(tmp_path: Path) -> None:
    votes, store, _ = path_for(tmp_path)
    answer = votes.handle(reply("approve demo-1", Identity("local", "alice\nINFO forged line")))
    assert answer.kind is AnswerKind.REFUSED and store.get_review("demo-1").votes == []


def test_one_person_on_two_channels_counts_once(tmp_path: Path) -> None:
    people = People([("alice", ["local:alice", "slack:U0AAA"])])
    votes, store, applied = path_for(tmp_path, people=people, required=2, local=["alice", "bob"],
                                     slack_users=["U0AAA"])
    assert votes.handle(reply("approve demo-1")).kind is AnswerKind.COUNTED
    again = votes.handle(reply("approve demo-1", ALICE_SLACK))
    assert again.kind is AnswerKind.COUNTED and "1 of 2 needed" in again.text
    assert [v.voter for v in store.get_review("demo-1").votes] == ["slack:U0AAA"]  # her later vote replaced hers
    assert votes.handle(reply("approve demo-1", BOB)).kind is AnswerKind.DECIDED and applied == ["demo-1"]


def test_reviewers_may_name_people(tmp_path: Path) -> None:
    people = People([("alice", ["slack:U0AAA"])])
    votes, _, applied = path_for(tmp_path, people=people, people_names=["alice"])
    stranger = votes.handle(reply("approve demo-1", Identity("slack", "U0ZZZ")))
    assert stranger.kind is AnswerKind.REFUSED and "people who may answer: alice" in stranger.text
    assert votes.handle(reply("approve demo-1", ALICE_SLACK)).kind is AnswerKind.DECIDED and applied == ["demo-1"]
    assert Authorizer(ALL, people).refusal(Reviewers(people=["alice"]), "slack:U0AAA") is None


def test_a_deciding_vote_is_applied_with_the_tick_disabled(tmp_path: Path) -> None:
    """No Service runs here: the vote path publishes the decided review to the runner subscribed."""
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    decisions = Decisions()
    decisions.subscribe(b.runner.apply_decided)
    votes = VotePath(b.store, Authorizer(ALL), clock=b.clock, decisions=decisions)
    answer = votes.handle(reply(f"approve {run.review_id}"))
    assert answer.kind is AnswerKind.DECIDED
    wait_for(lambda: b.store.get_run(run.id).status == "completed", timeout=10, what="the run to complete")
    assert b.store.get_review(run.review_id).status == "applied"


@pytest.mark.parametrize("text", ["pause demo-1 2h", "modify demo-1 context.limit=5", "retry demo-1 once more"])
def test_every_decision_walks_the_same_path(tmp_path: Path, text: str) -> None:
    votes, store, _ = path_for(tmp_path)
    assert votes.handle(reply(text)).counted
    assert len(store.get_review("demo-1").votes) == 1


def test_votes_that_arrive_together_are_cast_in_order_in_one_write_per_review(tmp_path: Path) -> None:
    votes, store, applied = path_for(tmp_path, required=2, local=["alice", "bob", "carol"])
    other = make_review(local=["alice"])
    other.id, other.run_id = "demo-2", "run-2"
    store.put_review(other)
    batches: list[dict[str, int]] = []
    cast = store.cast_votes

    def counting(batch):  # type: ignore[no-untyped-def]
        batches.append({review_id: len(casts) for review_id, casts in batch.items()})
        return cast(batch)

    store.cast_votes = counting  # type: ignore[method-assign]
    carol = Identity("local", "carol")
    answers = votes.handle_many([
        reply("approve demo-1", dedupe_key="k1"),
        reply("help"),
        reply("approve demo-2"),
        reply("approve demo-9"),
        reply("approve demo-1", BOB, dedupe_key="k2"),
        reply("reject demo-1 too late", carol),
        reply("approve demo-1", BOB, dedupe_key="k2"),
    ])
    assert batches == [{"demo-1": 4, "demo-2": 1}]  # one store call for the batch, each review's votes in order
    kinds = [a.kind if isinstance(a, Answer) else a for a in answers]
    assert kinds == [AnswerKind.COUNTED, AnswerKind.INFO, AnswerKind.DECIDED, AnswerKind.UNKNOWN_REVIEW,
                     AnswerKind.DECIDED, AnswerKind.ALREADY_DECIDED, AnswerKind.DUPLICATE]
    assert sorted(applied) == ["demo-1", "demo-2"]
    assert [v.voter for v in store.get_review("demo-1").votes] == ["local:alice", "local:bob"]


class CountedReads(SqliteStore):
    """The SQLite store, recording each read of reviews by id."""

    reads: list[list[str]]

    def get_review(self, review_id: str, **how: bool):  # type: ignore[no-untyped-def]
        self.reads.append([review_id])
        return super().get_review(review_id, **how)

    def get_reviews(self, review_ids):  # type: ignore[no-untyped-def]
        self.reads.append(list(review_ids))
        return super().get_reviews(review_ids)


def test_the_reviews_a_batch_names_are_read_in_one_store_call(tmp_path: Path) -> None:
    store = CountedReads(tmp_path / "state")
    for n in range(1, 4):
        review = make_review(local=["alice", "bob"])
        review.id, review.run_id, review.policy.approvals_required = f"demo-{n}", f"run-{n}", 2
        store.put_review(review)
    store.reads = []
    votes = VotePath(store, Authorizer(ALL), clock=FakeClock())
    answers = votes.handle_many([reply("approve demo-1"), reply("help"), reply("approve demo-2", BOB),
                                 reply("approve DEMO-3"), reply("approve demo-1", BOB), reply("approve demo-9")])
    assert [a.kind for a in answers if isinstance(a, Answer)] == [
        AnswerKind.COUNTED, AnswerKind.INFO, AnswerKind.COUNTED, AnswerKind.COUNTED, AnswerKind.DECIDED,
        AnswerKind.UNKNOWN_REVIEW]
    # one read for the batch; only the unknown id is asked again alone, then its close ids for the did-you-mean
    assert store.reads[:2] == [["demo-1", "demo-2", "DEMO-3", "demo-1", "demo-9"], ["demo-9"]]
    assert sorted(read for [read] in store.reads[2:]) == ["demo-1", "demo-2", "demo-3"]


def test_a_review_that_cannot_be_written_fails_its_own_replies_only(tmp_path: Path) -> None:
    votes, store, _ = path_for(tmp_path, local=["alice"])
    other = make_review(local=["alice"])
    other.id, other.run_id = "demo-2", "run-2"
    store.put_review(other)
    db_execute(store.root, "UPDATE reviews SET doc = substr(doc, 1, 40) WHERE key = 'demo-1'")  # its row, damaged
    first, second = votes.handle_many([reply("approve demo-1"), reply("approve demo-2")])
    assert isinstance(first, CorruptDocumentError) and "loopbot.db reviews/demo-1" in str(first)
    assert isinstance(second, Answer) and second.kind is AnswerKind.DECIDED
    with pytest.raises(CorruptDocumentError, match="reviews/demo-1"):
        votes.handle(reply("approve demo-1"))


class HeldGroupCheck:
    """Slack's membership whose check of some users (a user group asked of Slack's API) waits until released."""

    always_checks = False

    def __init__(self, *held: str) -> None:
        self.held = set(held)
        self.asked = threading.Semaphore(0)
        self.release = threading.Event()

    def refusal(self, reviewers: Reviewers, account: str, where: Mapping[str, Any]) -> str | None:
        if account in self.held:
            self.asked.release()
            assert self.release.wait(10)
        return None


async def test_slow_membership_checks_do_not_hold_up_other_voters_answers(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state")
    review = make_review(local=["alice"], slack_groups=["S0OPS"])
    review.policy.approvals_required = 4
    store.put_review(review)
    check = HeldGroupCheck("U0SLOW", "U0SLOWER")
    votes = VotePath(store, Authorizer({**ALL, "slack": check}), clock=FakeClock())
    batches = VoteBatches(votes, stall=0.01)
    slow = [asyncio.ensure_future(batches.vote(reply("approve demo-1", Identity("slack", user))))
            for user in ("U0SLOW", "U0SLOWER")]
    for _ in slow:  # both checks under way, each holding up a worker
        assert await asyncio.to_thread(check.asked.acquire, True, 10)
    quick = await asyncio.wait_for(batches.vote(reply("approve demo-1")), 10)  # answered while both checks wait
    assert (quick.kind, quick.text) == (AnswerKind.COUNTED, "approve from local:alice recorded: 1 of 4 needed")
    assert not any(vote.done() for vote in slow)
    assert [v.voter for v in store.get_review("demo-1").votes] == ["local:alice"]  # stored before it was answered
    check.release.set()
    assert [a.kind for a in await asyncio.wait_for(asyncio.gather(*slow), 10)] == [AnswerKind.COUNTED] * 2
    assert sorted(v.voter for v in store.get_review("demo-1").votes) == ["local:alice", "slack:U0SLOW",
                                                                           "slack:U0SLOWER"]
