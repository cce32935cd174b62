"""Who may answer on Slack when a loop names no reviewers, and what a mistyped review id tells an outsider.

Against the fake Slack Web API (real HTTP): ``conversations.members`` pages
its answer with a cursor as Slack does, so the whole of a large channel is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from adapters.slack import SlackClient, SlackDirectory
from bot.desk import Authorizer, ListMembership, VotePath
from bot.desk.slack_wiring import SlackMembership
from bot.store import SqliteStore
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi

from ..runtime_support import FakeClock
from .support import make_review

#: The review channel: 2,500 members, so the last one is on the third page of 1,000.
CREW = [f"U{n:07d}" for n in range(2_500)]
LAST = CREW[-1]
OUTSIDER = "U0OUTSIDE"


@pytest.fixture
def slack() -> Iterator[FakeSlackApi]:
    with FakeSlackApi(members={"C1": CREW, "C2": [OUTSIDER]}) as fake:
        yield fake


def _path(tmp_path: Path, slack: FakeSlackApi, now: list[float], **reviewers: list[str]) -> VotePath:
    store = SqliteStore(tmp_path / "state")
    review = make_review(**reviewers)
    review.policy.approvals_required = 3
    review.posts = [{"channel": "slack", "data": {"channel": "C1", "ts": "2.0", "thread_ts": "1.0"},
                     "target": "slack:C1"}]
    store.put_review(review)
    directory = SlackDirectory(SlackClient(BOT_TOKEN, base_url=slack.base_url), ttl=60, refresh_gap=5,
                               clock=lambda: now[0])
    authorizer = Authorizer({"local": ListMembership("local"), "slack": SlackMembership(directory)})
    return VotePath(store, authorizer, clock=FakeClock())


def _vote(votes: VotePath, user: str, text: str = "approve demo-1", **kw: object) -> Reply:
    return Reply(Identity("slack", user), parse_command(text), via="button", **kw)  # type: ignore[arg-type]


def test_without_reviewers_only_members_of_the_reviews_channel_may_answer(tmp_path: Path,
                                                                         slack: FakeSlackApi) -> None:
    now = [0.0]
    votes = _path(tmp_path, slack, now)
    counted = votes.handle(_vote(votes, LAST))  # a button: the review's own channel is where it was posted
    assert counted.kind is AnswerKind.COUNTED, counted.text
    pages = slack.calls_to("conversations.members")
    assert [call.params.get("cursor", "") for call in pages] == ["", "dXNlcjo1000", "dXNlcjo2000"]
    assert {call.params["channel"] for call in pages} == {"C1"}

    refused = votes.handle(_vote(votes, OUTSIDER))  # a member of the workspace, in another channel
    assert refused.kind is AnswerKind.REFUSED
    assert "not a member of channel C1" in refused.text and "only that channel's members" in refused.text
    from_elsewhere = votes.handle(_vote(votes, OUTSIDER, "approve", context={"channel": "C2", "thread_ts": "1.0"}))
    assert from_elsewhere.kind is AnswerKind.UNKNOWN_REVIEW  # a thread in another channel holds no review
    in_thread = votes.handle(_vote(votes, CREW[0], "approve", context={"channel": "C1", "thread_ts": "1.0"}))
    assert in_thread.kind is AnswerKind.COUNTED, in_thread.text


def test_the_channels_members_are_cached_for_a_bounded_time(tmp_path: Path, slack: FakeSlackApi) -> None:
    now = [0.0]
    votes = _path(tmp_path, slack, now)
    assert votes.handle(_vote(votes, CREW[1])).kind is AnswerKind.COUNTED
    fetched = len(slack.calls_to("conversations.members"))
    now[0] = 1
    assert votes.handle(_vote(votes, CREW[2])).kind is AnswerKind.COUNTED
    assert votes.handle(_vote(votes, OUTSIDER)).kind is AnswerKind.REFUSED  # a miss right after a fetch: no call
    assert len(slack.calls_to("conversations.members")) == fetched
    slack.members["C1"] = CREW[4:]  # CREW[3] left the channel
    now[0] = 61
    refused = votes.handle(_vote(votes, CREW[3]))
    assert refused.kind is AnswerKind.REFUSED, "after the ttl the channel is asked again"
    assert len(slack.calls_to("conversations.members")) == 2 * fetched  # every page again


def test_a_listed_reviewer_may_answer_from_anywhere(tmp_path: Path, slack: FakeSlackApi) -> None:
    votes = _path(tmp_path, slack, [0.0], slack_users=[OUTSIDER])
    assert votes.handle(_vote(votes, OUTSIDER)).kind is AnswerKind.COUNTED
    assert slack.calls_to("conversations.members") == []  # channel membership is not asked for


def test_a_mistyped_id_suggests_only_reviews_the_voter_may_answer(tmp_path: Path, slack: FakeSlackApi) -> None:
    votes = _path(tmp_path, slack, [0.0], slack_users=["U0AAA"])
    outsider = votes.handle(_vote(votes, OUTSIDER, "approve demo-2"))
    assert outsider.kind is AnswerKind.UNKNOWN_REVIEW
    assert "demo-1" not in outsider.text and "no review 'demo-2'" in outsider.text, outsider.text
    reviewer = votes.handle(_vote(votes, "U0AAA", "approve demo-2"))
    assert reviewer.kind is AnswerKind.UNKNOWN_REVIEW and 'did you mean "demo-1"' in reviewer.text
    status = votes.handle(_vote(votes, OUTSIDER, "status"))
    assert "demo-1" not in status.text
