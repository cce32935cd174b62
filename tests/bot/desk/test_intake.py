"""The webhook's queue: a delivery is recorded with its votes and answered, and the votes are cast after."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import bot.desk.intake as intake_module
from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from bot.desk import Authorizer, ListMembership, VotePath
from bot.desk.intake import IntakeQueue
from bot.store import SqliteStore

from ..runtime_support import FakeClock, wait_for
from .intake_child import vote
from .support import make_review

REPO = Path(__file__).resolve().parents[3]


def votes_on(tmp_path: Path, required: int = 10) -> tuple[SqliteStore, VotePath]:
    store = SqliteStore(tmp_path / "state")
    review = make_review()
    review.policy.approvals_required = required
    store.put_review(review)
    return store, VotePath(store, Authorizer({"github": ListMembership("github")}), clock=FakeClock())


def test_accepted_votes_are_cast_by_the_worker_and_the_delivery_finished(tmp_path: Path) -> None:
    store, path = votes_on(tmp_path)
    answers: list[AnswerKind] = []
    intake = IntakeQueue(store, lambda reply: answers.append(path.handle(reply).kind))
    intake.start()
    try:
        assert intake.accept("hook:d-1", [vote(1), vote(2)])
        assert not intake.accept("hook:d-1", [vote(1), vote(2)]), "a redelivery is refused before it is queued"
        wait_for(lambda: store.pending_deliveries() == [])
    finally:
        intake.stop()
    assert answers == [AnswerKind.COUNTED, AnswerKind.COUNTED]
    assert sorted(v.voter for v in store.get_review("demo-1").votes) == ["github:user1", "github:user2"]


def test_a_vote_the_store_could_not_take_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "RETRY_FIRST", 0.01)
    store, path = votes_on(tmp_path)
    failures = [OSError("disk busy")]

    def cast(reply: Reply) -> None:
        if failures:
            raise failures.pop()
        path.handle(reply)

    intake = IntakeQueue(store, cast)
    intake.start()
    try:
        assert intake.accept("hook:d-1", [vote(1)])
        wait_for(lambda: store.pending_deliveries() == [])
    finally:
        intake.stop()
    assert [v.voter for v in store.get_review("demo-1").votes] == ["github:user1"]


def test_a_damaged_vote_is_skipped_and_the_rest_cast(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store, path = votes_on(tmp_path)
    assert store.record_delivery("hook:d-1", [{"voter": "not a voter"}, vote(2).to_dict()])
    intake = IntakeQueue(store, lambda reply: path.handle(reply) and None)
    intake.start()
    try:
        wait_for(lambda: store.pending_deliveries() == [])
    finally:
        intake.stop()
    assert [v.voter for v in store.get_review("demo-1").votes] == ["github:user2"]
    assert "hook:d-1 holds a damaged vote" in caplog.text


def test_stop_leaves_what_it_could_not_cast_for_the_next_start(tmp_path: Path) -> None:
    store, path = votes_on(tmp_path)
    release = threading.Event()
    intake = IntakeQueue(store, lambda reply: release.wait() and None)
    intake.start()
    assert intake.accept("hook:d-1", [vote(1)])
    intake.stop(timeout=0.05)  # the cast hangs: stop gives up waiting
    assert [key for key, _work in store.pending_deliveries()] == ["hook:d-1"]
    release.set()


def test_kill_9_after_the_answer_and_before_the_votes_loses_none(tmp_path: Path) -> None:
    """A real process accepts (as the route does before its 200) and is SIGKILLed before casting anything."""
    store, path = votes_on(tmp_path)
    child = subprocess.Popen([sys.executable, "-m", "tests.bot.desk.intake_child", str(tmp_path / "state"), "3"],
                             cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "accepted"
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert store.get_review("demo-1").votes == []  # answered, not yet cast

    restarted = SqliteStore(tmp_path / "state")
    answers: list[AnswerKind] = []
    path = VotePath(restarted, Authorizer({"github": ListMembership("github")}), clock=FakeClock())
    intake = IntakeQueue(restarted, lambda reply: answers.append(path.handle(reply).kind))
    intake.start()
    try:
        wait_for(lambda: restarted.pending_deliveries() == [])
        assert not intake.accept("hook:d-0", [vote(0)]), "GitHub's redelivery of an accepted delivery is refused"
    finally:
        intake.stop()
    assert answers == [AnswerKind.COUNTED] * 3
    assert sorted(v.voter for v in restarted.get_review("demo-1").votes) == [f"github:user{n}" for n in range(3)]


def test_a_vote_cast_twice_after_a_crash_counts_once(tmp_path: Path) -> None:
    """Cast, then killed before the delivery was marked finished: the next start answers it as a duplicate."""
    store, path = votes_on(tmp_path)
    assert store.record_delivery("hook:d-1", [vote(1).to_dict()])
    assert path.handle(vote(1)).kind is AnswerKind.COUNTED  # the cast that happened before the crash
    answers: list[AnswerKind] = []
    intake = IntakeQueue(store, lambda reply: answers.append(path.handle(reply).kind))
    intake.start()
    try:
        wait_for(lambda: store.pending_deliveries() == [])
    finally:
        intake.stop()
    assert answers == [AnswerKind.DUPLICATE]
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


def test_a_burst_is_accepted_first_and_cast_once_deliveries_stop(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "QUIET", 1.0)
    store, path = votes_on(tmp_path, required=100)
    cast: list[str] = []
    intake = IntakeQueue(store, lambda reply: cast.append(reply.voter.id) or None)
    intake.start()
    try:
        for n in range(20):
            assert intake.accept(f"hook:d-{n}", [vote(n)])
        assert cast == [], "nothing cast while deliveries keep arriving"
        wait_for(lambda: len(cast) == 20, what="the burst cast once the webhook went quiet")
    finally:
        intake.stop()
    assert cast == [f"user{n}" for n in range(20)]


def test_a_steady_stream_still_has_its_votes_cast_within_max_wait(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake_module, "QUIET", 60.0)  # never quiet while this test delivers
    monkeypatch.setattr(intake_module, "MAX_WAIT", 0.2)
    store, _path = votes_on(tmp_path)
    cast: list[str] = []
    intake = IntakeQueue(store, lambda reply: cast.append(reply.voter.id) or None)
    intake.start()
    try:
        n = 0
        deadline = time.monotonic() + 10
        while not cast and time.monotonic() < deadline:
            assert intake.accept(f"hook:d-{n}", [vote(n)])
            n += 1
            time.sleep(0.02)
        assert cast and cast[0] == "user0", "the oldest vote was cast while deliveries kept coming"
    finally:
        intake.stop()
