"""GitHub's answer queue: a delivery is recorded with its votes and answered; the votes are cast after, in batches."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

import bot.desk.answer_queue as answer_queue_module
from adapters.channel import Answer, AnswerKind, Identity, Reply
from adapters.commands import parse_command
from adapters.vote_batches import VotesHandler
from bot.desk import Authorizer, ListMembership, VotePath
from bot.desk.answer_queue import AnswerQueue, Finish
from bot.reviews import Cast, VoteResult
from bot.store import SqliteStore
from bot.store.base import OutboxTask

from ..runtime_support import FakeClock, wait_for
from ..store.test_store_contract import recorded
from .answer_queue_child import FailingClock, vote
from .support import make_review

REPO = Path(__file__).resolve().parents[3]


class CountingStore(SqliteStore):
    """The SQLite store, counting the writes the queue makes: records, casts and finishes, with what each carried."""

    def __init__(self, state_dir: Path, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(state_dir, clock=clock)
        self.records: list[int] = []  # deliveries per record_deliveries call
        self.casts: list[int] = []  # votes per cast_votes call
        self.finishes: list[int] = []  # deliveries per finish_deliveries call

    def record_deliveries(self, batch: Sequence[tuple[str, list[dict[str, Any]] | None]]) -> list[bool]:
        self.records.append(len(batch))
        return super().record_deliveries(batch)

    def cast_votes(self, batch: Mapping[str, Sequence[Cast]]) -> dict[str, list[VoteResult] | Exception]:
        self.casts.append(sum(len(group) for group in batch.values()))
        return super().cast_votes(batch)

    def finish_deliveries(self, keys: Sequence[str], answers: Sequence[OutboxTask] = ()) -> None:
        self.finishes.append(len(keys))
        super().finish_deliveries(keys, answers)


class Told:
    """The queue's ``finish``: marks the deliveries done in the store and keeps each voter's answer."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.kinds: list[AnswerKind] = []

    def __call__(self, keys: Sequence[str], answers: Sequence[tuple[Reply, Answer]]) -> None:
        self.kinds += [answer.kind for _reply, answer in answers]
        self.store.finish_deliveries(keys)


def votes_on(tmp_path: Path, required: int = 10) -> tuple[CountingStore, VotePath]:
    store = CountingStore(tmp_path / "state")
    review = make_review()
    review.policy.approvals_required = required
    store.put_review(review)
    return store, VotePath(store, Authorizer({"github": ListMembership("github")}), clock=FakeClock())


@contextmanager
def running(store: SqliteStore, cast: VotesHandler, finish: Finish) -> Iterator[AnswerQueue]:
    """A started queue, stopped when the block ends however it ends, so no caster thread outlives its test."""
    answers = AnswerQueue(store, cast, finish)
    answers.start()
    try:
        yield answers
    finally:
        answers.stop()


@contextmanager
def restarted_on(tmp_path: Path) -> Iterator[tuple[SqliteStore, Told, AnswerQueue]]:
    """A next process on the same state dir: its store, what its voters were told, its running queue."""
    store = SqliteStore(tmp_path / "state")
    told = Told(store)
    path = VotePath(store, Authorizer({"github": ListMembership("github")}), clock=FakeClock())
    with running(store, path.handle_many, told) as answers:
        yield store, told, answers


def test_accepted_votes_are_cast_by_the_caster_and_the_delivery_finished(tmp_path: Path) -> None:
    store, path = votes_on(tmp_path)
    told = Told(store)
    with running(store, path.handle_many, told) as answers:
        assert answers.accept("hook:d-1", [vote(1), vote(2)])
        assert not answers.accept("hook:d-1", [vote(1), vote(2)]), "a redelivery is refused before it is queued"
        wait_for(lambda: store.pending_deliveries() == [])
    assert told.kinds == [AnswerKind.COUNTED, AnswerKind.COUNTED]
    assert sorted(v.voter for v in store.get_review("demo-1").votes) == ["github:user1", "github:user2"]


def test_deliveries_that_wait_together_are_cast_in_one_write_and_finished_in_one(tmp_path: Path) -> None:
    """While one batch is cast the next deliveries wait; they are all cast in one batch after it."""
    store, path = votes_on(tmp_path, required=100)
    casting, release = threading.Event(), threading.Event()
    batches: list[int] = []

    def cast(replies: Sequence[Reply]) -> list[Answer | Exception]:
        batches.append(len(replies))
        if len(batches) == 1:
            casting.set()
            release.wait(10)
        return path.handle_many(replies)

    with running(store, cast, Told(store)) as answers:
        assert answers.accept("hook:d-0", [vote(0)])
        assert casting.wait(10)
        for n in range(1, 41):
            assert answers.accept(f"hook:d-{n}", [vote(n)])
        release.set()
        wait_for(lambda: store.pending_deliveries() == [])
    assert batches == [1, 40]
    assert store.casts == [1, 40] and store.finishes == [1, 40], "one write to cast 40 deliveries, one to finish"
    assert len(store.get_review("demo-1").votes) == 41


def test_while_deliveries_stream_in_the_caster_waits_to_cast_them_together(tmp_path: Path) -> None:
    """The first delivery after a quiet spell is cast at once; those right after it wait for the batch to fill."""
    store, path = votes_on(tmp_path, required=100)
    answers = AnswerQueue(store, path.handle_many, Told(store), most=3, linger=60.0)
    answers.start()
    try:
        assert answers.accept("hook:d-0", [vote(0)])
        wait_for(lambda: store.casts == [1], what="the first vote cast without waiting out the 60 s")
        for n in range(1, 4):
            assert answers.accept(f"hook:d-{n}", [vote(n)])
        wait_for(lambda: store.pending_deliveries() == [])
    finally:
        answers.stop()
    assert store.casts == [1, 3], "one cast for the three that came one after another"


def accept_a_batch_after_one(answers: AnswerQueue, count: int) -> list[bool | BaseException]:
    """Delivery 0 is accepted alone, then deliveries 1..count-1 in one batch (the webhook route's next commit).

    What each delivery's acceptance returned (or raised), by delivery.
    """
    results: list[bool | BaseException] = [answers.accept("hook:d-0", [vote(0)])]
    try:
        results += answers.accept_many([(f"hook:d-{n}", [vote(n)]) for n in range(1, count)])
    except Exception as err:  # noqa: BLE001 - what the route would answer 500 for, to each of the batch
        results += [err] * (count - 1)
    return results


def test_the_intake_is_busy_for_a_moment_after_each_delivery(tmp_path: Path) -> None:
    store, path = votes_on(tmp_path)
    answers = AnswerQueue(store, path.handle_many, Told(store))
    assert answers.busy() <= 0, "nothing accepted yet: quiet"
    assert answers.accept("hook:d-1", [vote(1)])
    assert 0 < answers.busy() <= answer_queue_module.QUIET
    wait_for(lambda: answers.busy() <= 0, what="quiet again QUIET s after the delivery")


def test_a_batch_of_deliveries_is_recorded_in_one_commit_and_only_its_new_ones_queued(tmp_path: Path) -> None:
    """The webhook's batch: one transaction, an answer per delivery, a redelivery in it refused and not cast."""
    store, path = votes_on(tmp_path)
    told = Told(store)
    with running(store, path.handle_many, told) as answers:
        assert answers.accept("hook:d-1", [vote(1)])
        batch = [("hook:d-1", [vote(1)]), ("hook:d-2", [vote(2)]), ("hook:d-3", [vote(3)])]
        assert answers.accept_many(batch) == [False, True, True]
        assert store.records == [1, 3], "the batch in one record_deliveries call"
        wait_for(lambda: not store.pending_deliveries() and len(told.kinds) == 3, what="the three votes cast")
    assert told.kinds.count(AnswerKind.DUPLICATE) == 0, "the redelivery was never queued, so never answered"


def test_a_commit_that_fails_fails_every_delivery_in_it_and_keeps_none(tmp_path: Path) -> None:
    clock = FailingClock(fail_at=3)  # the second commit fails after writing one of its rows
    store = SqliteStore(tmp_path / "state", clock=clock)
    clock.armed = True
    answers = AnswerQueue(store, lambda replies: [], lambda keys, answered: None)
    results = accept_a_batch_after_one(answers, 4)
    assert results[0] is True
    assert all(isinstance(result, RuntimeError) for result in results[1:]), results
    assert [key for key, _work in store.pending_deliveries()] == ["hook:d-0"]
    assert answers.accept("hook:d-2", [vote(2)]), "never acknowledged, so GitHub's retry is new"


def test_kill_9_inside_a_shared_commit_acknowledges_none_of_it(tmp_path: Path) -> None:
    """The process dies inside the commit that records deliveries 1..3 together, after one of its rows."""
    child = subprocess.Popen([sys.executable, "-m", "tests.bot.desk.answer_queue_child", str(tmp_path / "state"),
                              "4", "--die-in-commit"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert child.stdout is not None
    acknowledged = child.stdout.read().split()
    assert set(acknowledged) <= {"hook:d-0"}, acknowledged
    store = SqliteStore(tmp_path / "state")
    assert [key for key, _work in store.pending_deliveries()] == ["hook:d-0"], "d-0's commit stood, no row of the next"
    assert store.record_deliveries([(f"hook:d-{n}", None) for n in range(4)]) == [False, True, True, True]


def test_a_vote_the_store_could_not_take_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_queue_module, "RETRY_FIRST", 0.01)
    store, path = votes_on(tmp_path)
    failures = [OSError("disk busy")]

    def cast(replies: Sequence[Reply]) -> list[Answer | Exception]:
        if failures:
            raise failures.pop()
        return path.handle_many(replies)

    with running(store, cast, Told(store)) as answers:
        assert answers.accept("hook:d-1", [vote(1)])
        wait_for(lambda: store.pending_deliveries() == [])
    assert [v.voter for v in store.get_review("demo-1").votes] == ["github:user1"]


def test_only_the_delivery_whose_review_failed_waits_for_the_retry(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(answer_queue_module, "RETRY_FIRST", 0.01)
    store, path = votes_on(tmp_path)
    failed: list[str] = []

    def cast(replies: Sequence[Reply]) -> list[Answer | Exception]:
        answers = path.handle_many(replies)
        if not failed and any(reply.voter.id == "user2" for reply in replies):
            failed.append("user2")  # the first time: user2's review could not be written
            return [OSError("disk full") if reply.voter.id == "user2" else answer
                    for reply, answer in zip(replies, answers, strict=True)]
        return answers

    finished: list[str] = []

    def finish(keys: Sequence[str], answered: Sequence[tuple[Reply, Answer]]) -> None:
        finished.extend(keys)
        store.finish_deliveries(keys)

    with running(store, cast, finish) as answers:
        assert answers.accept("hook:d-1", [vote(1)]) and answers.accept("hook:d-2", [vote(2)])
        wait_for(lambda: store.pending_deliveries() == [])
    assert finished == ["hook:d-1", "hook:d-2"], "d-1 finished at once, d-2 after its retry"


def test_a_damaged_vote_is_skipped_and_the_rest_cast(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, path = votes_on(tmp_path)
    assert recorded(store, "hook:d-1", [{"voter": "not a voter"}, vote(2).to_dict()])
    with running(store, path.handle_many, Told(store)):
        wait_for(lambda: store.pending_deliveries() == [])
    assert [v.voter for v in store.get_review("demo-1").votes] == ["github:user2"]
    assert "hook:d-1 holds a damaged vote" in caplog.text


def test_stop_leaves_what_it_could_not_cast_for_the_next_start(tmp_path: Path) -> None:
    store, _path = votes_on(tmp_path)
    release = threading.Event()

    def hang(replies: Sequence[Reply]) -> list[Answer | Exception]:
        release.wait(10)
        raise OSError("never cast")

    answers = AnswerQueue(store, hang, Told(store))
    answers.start()
    assert answers.accept("hook:d-1", [vote(1)])
    answers.stop(timeout=0.05)  # the cast hangs: stop gives up waiting
    assert [key for key, _work in store.pending_deliveries()] == ["hook:d-1"]
    release.set()


def test_kill_9_after_the_answer_and_before_the_votes_loses_none(tmp_path: Path) -> None:
    """A real process accepts (as the route does before its 200) and is SIGKILLed before casting anything."""
    store, path = votes_on(tmp_path)
    child = subprocess.Popen([sys.executable, "-m", "tests.bot.desk.answer_queue_child", str(tmp_path / "state"),
                              "3"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "accepted"
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert store.get_review("demo-1").votes == []  # answered, not yet cast

    with restarted_on(tmp_path) as (restarted, told, answers):
        wait_for(lambda: restarted.pending_deliveries() == [])
        assert not answers.accept("hook:d-0", [vote(0)]), "GitHub's redelivery of an accepted delivery is refused"
    assert told.kinds == [AnswerKind.COUNTED] * 3
    assert sorted(v.voter for v in restarted.get_review("demo-1").votes) == [f"github:user{n}" for n in range(3)]


def test_a_vote_cast_twice_after_a_crash_counts_once(tmp_path: Path) -> None:
    """Cast, then killed before the delivery was marked finished: the next start answers it as a duplicate."""
    store, path = votes_on(tmp_path)
    assert recorded(store, "hook:d-1", [vote(1).to_dict()])
    assert path.handle(vote(1)).kind is AnswerKind.COUNTED  # the cast that happened before the crash
    told = Told(store)
    with running(store, path.handle_many, told):
        wait_for(lambda: store.pending_deliveries() == [])
    assert told.kinds == [AnswerKind.DUPLICATE]
    assert len(store.get_review("demo-1").history) == 1


def test_replies_round_trip_through_json() -> None:
    pause = Reply(Identity("github", "alice", "Alice"), parse_command("pause demo-1 2h"), context={"issue": 4},
                  dedupe_key="k", via="github label", respond={"comment_id": 9})
    modify = Reply(Identity("slack", "U1"), parse_command("modify demo-2 context.limit=5 context.tags=[\"a\",\"b\"]"))
    bad = Reply(Identity("local", "bob"), parse_command("aprove demo-1"))
    for reply in (pause, modify, Reply(Identity("local", "bob"), parse_command("help"))):
        assert Reply.from_dict(reply.to_dict()) == reply
    again = Reply.from_dict(bad.to_dict())
    assert str(again.command) == str(bad.command) and again.voter == bad.voter
    with pytest.raises(ValueError, match="not a stored reply"):
        Reply.from_dict({"voter": {}})


def test_polled_comments_survive_a_crash_between_record_and_cast(tmp_path: Path) -> None:
    """The poller records each comment like a webhook delivery before it moves its cursor; a process that dies
    before casting leaves them to the next start, which the cursor no longer reads them for."""
    from adapters.github.client import GitHubClient, make_github
    from adapters.github.poll import MemoryPollState, Poller, Watch
    from tests.fakes.github_api import FakeGitHub

    store, path = votes_on(tmp_path)
    cursor = MemoryPollState()
    with FakeGitHub() as fake:
        fake.add_issue("octo/ops", 42, title="Ops reviews")
        since = fake.clock()
        comments = [fake.add_comment("octo/ops", 42, "/approve demo-1", login) for login in ("alice", "bob")]
        client = GitHubClient(make_github(fake.base_url, token="ghp_test"))
        dying = AnswerQueue(store, path.handle_many, Told(store))  # never started: the process dies first
        watch = Watch("octo/ops", 42, since=since.replace(year=since.year - 1))
        assert Poller(client, cursor, dying.accept, bot_login=fake.bot_login).poll_once([watch]).replies == 2
        assert store.get_review("demo-1").votes == []

        with restarted_on(tmp_path) as (restarted, told, answers):
            wait_for(lambda: restarted.pending_deliveries() == [])
            again = Poller(client, cursor, answers.accept, bot_login=fake.bot_login).poll_once([watch])
    assert again.replies == 0, "the cursor had moved: only the record kept these votes"
    assert told.kinds == [AnswerKind.COUNTED, AnswerKind.COUNTED]
    assert {v.delivery_key for v in restarted.get_review("demo-1").votes} == {
        f"github:comment:{comment['id']}" for comment in comments}
