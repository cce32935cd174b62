"""The Channel contract: every channel passes these (local, Slack against its fake API, GitHub against its fake).

Add a channel by adding a ``Kind``: ``make`` builds the channel (and
whatever fake it talks to) and returns it with two targets of its kind and
a way to break delivery. The outbox relies on exactly these promises:
posting is idempotent per target (also from a new instance, as after a
crash), refs survive JSON, updates and escalations land, and a failed
delivery is a ``ChannelError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from adapters.channel import Answer, AnswerKind, Channel, ChannelError, MessageRef, ReviewPost, Target
from adapters.github import GitHubChannel, GitHubClient, make_github
from adapters.local import LocalChannel
from adapters.slack import SlackChannel, SlackClient
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlackApi


def make_post(review_id: str = "demo-1", status: str = "open") -> ReviewPost:
    request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST,
                            proposed_action="apply labels", timestamp=datetime(2026, 3, 2, 9, 0))
    return ReviewPost(review_id, "demo", "demo-run-1", request, approvals_required=1, status=status)


@dataclass
class Setup:
    """A channel, where it posts, how to make it fail, and how many messages of a review exist."""

    fresh: Callable[[], Channel]  # a new instance on the same outside world: a process after a crash
    targets: tuple[Target, Target]
    break_delivery: Callable[[], None]
    messages: Callable[[str], int]
    respond: dict[str, object]


def _local(tmp_path: Path) -> Iterator[Setup]:
    directory = tmp_path / "local-reviews"

    def break_it() -> None:
        (directory / "demo-9.md").mkdir(parents=True)  # a directory where the file goes: fails even for root

    yield Setup(
        fresh=lambda: LocalChannel(directory),
        targets=(Target("local"), Target("local")),
        break_delivery=break_it,
        messages=lambda rid: int((directory / f"{rid}.md").is_file()),
        respond={},
    )


def _slack(tmp_path: Path) -> Iterator[Setup]:
    with FakeSlackApi() as fake:
        def messages(rid: str) -> int:
            found = 0
            for channel in ("C0AAA", "C0BBB"):
                for message in fake.channel_messages(channel):
                    meta = message.get("metadata") or {}
                    found += (meta.get("event_payload") or {}).get("review_id") == rid
            return found

        yield Setup(
            fresh=lambda: SlackChannel(SlackClient("xoxb-test", base_url=fake.base_url)),
            targets=(Target("slack", channel="C0AAA"), Target("slack", channel="C0BBB")),
            break_delivery=lambda: fake.fail("chat.postMessage", status=500, times=None),
            messages=messages,
            respond={"channel": "C0AAA", "user": "U0AAA"},
        )


def _github(tmp_path: Path) -> Iterator[Setup]:
    with FakeGitHub() as fake:
        fake.add_issue("octo/ops", 42, title="Ops reviews")
        fake.add_issue("octo/ops", 43, title="More reviews")

        def messages(rid: str) -> int:
            marker = f"<!-- loopbot:review={rid} -->"
            return sum(marker in c["body"] for n in (42, 43) for c in fake.comments_on("octo/ops", n))

        yield Setup(
            fresh=lambda: GitHubChannel(GitHubClient(make_github(fake.base_url, token="ghp_test")),
                                        bot_login=fake.bot_login),
            targets=(Target("github", repository="octo/ops", issue=42),
                     Target("github", repository="octo/ops", issue=43)),
            break_delivery=lambda: fake.fail("POST", r".*/comments$", 500, times=100),
            messages=messages,
            respond={"repository": "octo/ops", "issue": 42,
                     "comment_id": fake.add_comment("octo/ops", 42, "/approve")["id"]},
        )


KINDS = {"local": _local, "slack": _slack, "github": _github}


@pytest.fixture(params=list(KINDS))
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    yield from KINDS[request.param](tmp_path)


def test_it_is_a_channel(setup: Setup) -> None:
    assert isinstance(setup.fresh(), Channel)


def test_posting_twice_to_one_target_makes_one_message_even_from_a_new_instance(setup: Setup) -> None:
    target = setup.targets[0]
    first = setup.fresh().post_request(target, make_post())
    again = setup.fresh().post_request(target, make_post())  # a retry after kill -9
    assert again.data == first.data and again.channel == first.channel
    assert setup.messages("demo-1") == 1


def test_two_targets_of_one_kind_get_their_own_messages(setup: Setup) -> None:
    one, two = setup.targets
    channel = setup.fresh()
    refs = [channel.post_request(one, make_post()), channel.post_request(two, make_post())]
    if one == two:  # the local channel has one place, every review's file: the same target twice is one message
        assert refs[0] == refs[1] and setup.messages("demo-1") == 1
        return
    assert refs[0].data != refs[1].data
    assert setup.messages("demo-1") == 2


def test_refs_round_trip_through_json(setup: Setup) -> None:
    ref = setup.fresh().post_request(setup.targets[0], make_post())
    assert MessageRef.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref


def test_update_escalation_and_answer_are_delivered(setup: Setup) -> None:
    channel = setup.fresh()
    ref = channel.post_request(setup.targets[0], make_post())
    channel.post_update(ref, make_post(status="applied"), "Decided: APPROVE by local:alice at 2026-03-02T10:00:00")
    escalation = channel.post_escalation(setup.targets[1], make_post(), "Escalated: no decision for 8h")
    assert escalation.channel == channel.name
    channel.answer(setup.respond, Answer(AnswerKind.COUNTED, "approve recorded: 1 of 2 needed", "demo-1"))


def test_a_failed_delivery_is_a_channel_error(setup: Setup) -> None:
    setup.break_delivery()
    with pytest.raises(ChannelError):
        setup.fresh().post_request(setup.targets[0], make_post("demo-9"))
