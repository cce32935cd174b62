"""The poller against the fake GitHub server: new comments once, 304 when idle, pages followed, labels."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from adapters.channel import Reply
from adapters.commands import Command
from adapters.github.client import GitHubClient
from adapters.github.poll import MemoryPollState, Poller, Watch
from loop_engine.checkpoint import HumanDecision
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO

START = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def tick(self, seconds: int = 60) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock(fake: FakeGitHub) -> Clock:
    clock = Clock()
    fake.clock = clock
    return clock


@pytest.fixture
def submitted() -> list[Reply]:
    return []


def accepting(submitted: list[Reply], keys: list[str] | None = None) -> Callable[[str, list[Reply]], bool]:
    """A poller's ``accept``: keeps every reply (and, given ``keys``, each delivery's key)."""

    def accept(key: str, replies: list[Reply]) -> bool:
        submitted.extend(replies)
        if keys is not None:
            keys.append(key)
        return True

    return accept


@pytest.fixture
def state() -> MemoryPollState:
    return MemoryPollState()


@pytest.fixture
def poller(client: GitHubClient, state: MemoryPollState, submitted: list[Reply], clock: Clock,
           fake: FakeGitHub) -> Poller:
    return Poller(client, state, accepting(submitted), bot_login=fake.bot_login, clock=clock)


def test_new_comments_are_found_once(poller: Poller, fake: FakeGitHub, clock: Clock,
                                     submitted: list[Reply]) -> None:
    watch = Watch(REPO, 42, since=START)
    fake.add_comment(REPO, 42, "/approve older review", "alice", created_at=START - timedelta(hours=1))
    clock.tick()
    vote = fake.add_comment(REPO, 42, "/approve", "alice")
    fake.add_comment(REPO, 42, "just chatting", "bob")
    fake.add_comment(REPO, 42, "/reject no", fake.bot_login)
    report = poller.poll_once([watch])
    assert report.replies == 1 and report.errors == []
    (reply,) = submitted
    assert reply.command == Command(HumanDecision.APPROVE)
    assert reply.dedupe_key == f"github:comment:{vote['id']}"
    assert reply.context == {"repository": REPO, "issue": 42} and reply.via == "github:poll"
    clock.tick()
    poller.poll_once([watch])
    assert len(submitted) == 1
    clock.tick()
    fake.add_comment(REPO, 42, "/retry", "bob")
    poller.poll_once([watch])
    assert [r.voter.id for r in submitted] == ["alice", "bob"]


def test_an_idle_poll_sends_if_none_match_and_gets_304(poller: Poller, fake: FakeGitHub, clock: Clock) -> None:
    watch = Watch(REPO, 42, since=START)
    clock.tick()
    fake.add_comment(REPO, 42, "/approve", "alice")
    poller.poll_once([watch])  # finds the comment; the cursor moves
    poller.poll_once([watch])  # same since again: unconditional once, remembers the ETag
    before = fake.rate_remaining
    poller.poll_once([watch])
    comments = fake.calls_to("GET", r"/issues/42/comments$")[-1]
    events = fake.calls_to("GET", r"/issues/42/events$")[-1]
    assert comments.headers.get("if-none-match") and comments.status == 304
    assert events.headers.get("if-none-match") and events.status == 304
    assert fake.rate_remaining == before  # 304s cost nothing


def test_pages_are_followed(client: GitHubClient, fake: FakeGitHub, clock: Clock, submitted: list[Reply]) -> None:
    fake.page_size_cap = 2
    poller = Poller(client, MemoryPollState(), accepting(submitted), clock=clock)
    clock.tick()
    for n in range(5):
        fake.add_comment(REPO, 42, f"/approve note {n}", f"user{n}")
    poller.poll_once([Watch(REPO, 42, since=START)])
    assert [r.voter.id for r in submitted] == [f"user{n}" for n in range(5)]
    assert len(fake.calls_to("GET", r"/issues/42/comments$")) == 3


def test_a_whole_repository_can_be_watched(poller: Poller, fake: FakeGitHub, clock: Clock,
                                           submitted: list[Reply]) -> None:
    fake.add_issue(REPO, 7)
    clock.tick()
    fake.add_comment(REPO, 7, "/approve triage-3", "alice")
    fake.add_comment(REPO, 42, "/pause 2h", "bob")
    fake.add_label_event(REPO, 7, "loopbot:reject", "carol")
    poller.poll_once([Watch(REPO, since=START)])
    got = {(r.voter.id, r.context["issue"] if r.context else None) for r in submitted}
    assert got == {("alice", 7), ("bob", 42), ("carol", 7)}
    poller.poll_once([Watch(REPO, since=START)])
    assert len(submitted) == 3


def test_label_events_are_votes(poller: Poller, fake: FakeGitHub, clock: Clock, submitted: list[Reply]) -> None:
    watch = Watch(REPO, 42, since=START)
    poller.poll_once([watch])
    clock.tick()
    event = fake.add_label_event(REPO, 42, "loopbot:approve", "alice")
    fake.add_label_event(REPO, 42, "bug", "alice")
    poller.poll_once([watch])
    (reply,) = submitted
    assert reply.command == Command(HumanDecision.APPROVE)
    assert reply.dedupe_key == "github:label:octo/ops#42:loopbot:approve:alice"  # as the webhook makes it
    assert reply.respond["label_at"] == event["created_at"]


def test_the_cursor_survives_a_restart(client: GitHubClient, fake: FakeGitHub, clock: Clock,
                                       state: MemoryPollState, submitted: list[Reply]) -> None:
    watch = Watch(REPO, 42, since=START)
    clock.tick()
    fake.add_comment(REPO, 42, "/approve", "alice")
    Poller(client, state, accepting(submitted), clock=clock).poll_once([watch])
    clock.tick(3600)
    fake.add_comment(REPO, 42, "/retry", "bob")  # while the bot was down
    Poller(client, state, accepting(submitted), clock=clock).poll_once([watch])
    assert [r.voter.id for r in submitted] == ["alice", "bob"]
    assert state.state["version"] == 1 and REPO + "#42" in state.state["watches"]


def test_a_rate_limit_stops_the_round_and_is_reported(poller: Poller, fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 7)
    fake.fail("GET", r"/issues/42/comments$", 429, headers={"Retry-After": "12"})
    report = poller.poll_once([Watch(REPO, 42), Watch(REPO, 7)])
    assert report.retry_after == 12.0
    assert fake.calls_to("GET", r"/issues/7/") == []


def test_a_failing_watch_does_not_stop_the_others(poller: Poller, fake: FakeGitHub, clock: Clock,
                                                  submitted: list[Reply]) -> None:
    fake.add_issue(REPO, 7)
    clock.tick()
    fake.add_comment(REPO, 7, "/approve", "alice")
    report = poller.poll_once([Watch(REPO, 999, since=START), Watch(REPO, 7, since=START)])
    assert len(report.errors) == 1 and report.errors[0].permanent
    assert [r.voter.id for r in submitted] == ["alice"]


def test_repository_events_stop_at_what_is_older_than_the_watch(client: GitHubClient, fake: FakeGitHub,
                                                                clock: Clock, submitted: list[Reply]) -> None:
    fake.page_size_cap = 2
    clock.now = START - timedelta(hours=1)
    for _ in range(6):
        fake.add_label_event(REPO, 42, "bug", "old")  # history before the watch
    clock.now = START + timedelta(minutes=1)
    fake.add_label_event(REPO, 42, "loopbot:approve", "alice")
    Poller(client, MemoryPollState(), accepting(submitted), clock=clock).poll_once([Watch(REPO, since=START)])
    assert [r.voter.id for r in submitted] == ["alice"]
    assert len(fake.calls_to("GET", r"/repos/octo/ops/issues/events$")) == 1  # not all 4 pages


def test_a_comment_edited_before_it_was_read_is_no_vote_as_for_the_webhook(
        poller: Poller, fake: FakeGitHub, clock: Clock, submitted: list[Reply]) -> None:
    watch = Watch(REPO, 42, since=START)
    clock.tick()
    edited = fake.add_comment(REPO, 42, "thinking about it", "alice")
    clock.tick()
    edited["body"], edited["updated_at"] = "/approve", "2026-01-02T09:02:30Z"  # edited between two polls
    fresh = fake.add_comment(REPO, 42, "/reject not yet", "bob")
    poller.poll_once([watch])
    assert [r.dedupe_key for r in submitted] == [f"github:comment:{fresh['id']}"]


def test_each_comment_is_accepted_under_the_key_the_webhook_gives_it(client: GitHubClient, fake: FakeGitHub,
                                                                   clock: Clock, submitted: list[Reply]) -> None:
    keys: list[str] = []
    clock.tick()
    first = fake.add_comment(REPO, 42, "/approve", "alice")
    second = fake.add_comment(REPO, 42, "/reject not yet", "bob")
    Poller(client, MemoryPollState(), accepting(submitted, keys), clock=clock).poll_once([Watch(REPO, 42, since=START)])
    assert keys == [f"github:comment:{first['id']}", f"github:comment:{second['id']}"]
    assert [reply.voter.id for reply in submitted] == ["alice", "bob"]
