"""loopbot's own GitHub identity: learned before the channel posts, retried until known, never guessed."""

from __future__ import annotations

import pytest

from adapters.channel import ChannelError, Target
from adapters.github.channel import GitHubChannel
from adapters.github.client import GitHubClient
from adapters.github.identity import BotIdentity, Me
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO, make_post

TARGET = Target("github", repository=REPO, issue=42)


def test_require_learns_once_and_again_after_a_failure() -> None:
    answers: list[Me | ChannelError] = [ChannelError("HTTP 502", retry_after=7.0), Me("loopbot-user")]
    asked = []

    def learn() -> Me:
        asked.append(1)
        answer = answers.pop(0)
        if isinstance(answer, ChannelError):
            raise answer
        return answer

    identity = BotIdentity(learn)
    with pytest.raises(ChannelError, match="does not know its own GitHub login yet") as failed:
        identity.require()
    assert failed.value.retry_after == 7.0 and not failed.value.permanent  # the outbox tries again
    assert identity.is_self({"login": "loopbot-user"}) is False  # unknown: nobody is taken for loopbot
    assert identity.require() == Me("loopbot-user") == identity.require()
    assert len(asked) == 2


def test_the_channel_posts_nothing_while_it_does_not_know_itself(client: GitHubClient, fake: FakeGitHub) -> None:
    bait = fake.add_comment(REPO, 42, "<!-- loopbot:review=triage-17 -->\nnot loopbot", "mallory")
    fake.fail("GET", r"^/user$", 500)
    channel = GitHubChannel(client)  # no identity given: it learns it through the client
    with pytest.raises(ChannelError):
        channel.post_request(TARGET, make_post())
    assert not fake.calls_to("POST", r"/comments$") and not fake.calls_to("GET", r"/issues/42/comments$")
    ref = channel.post_request(TARGET, make_post())  # the outbox's retry: now it knows
    assert ref.data["comment_id"] != bait["id"]
    assert fake.comments[ref.data["comment_id"]]["user"]["login"] == fake.bot_login
