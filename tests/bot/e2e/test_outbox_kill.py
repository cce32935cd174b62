"""kill -9 of ``loopbot serve`` in the middle of an outbox round, against the fake GitHub and Slack over HTTP.

The outbox finishes a round's delivered tasks in one write after the round,
so a crash inside a round delivers the round's tasks again on restart. These
tests kill a real serve process while the fake holds back its answer to one
request of a round (the request has taken effect: the comment or message
exists), start serve again and check what people see: each answer and each
post exactly once, nothing lost, the outbox empty. On SQLite and on
PostgreSQL (whose leases let a restarted serve take the killed one's tasks
once ``lease_seconds`` have passed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.slack.channel import EVENT_REVIEW, EVENT_RUN
from bot.store import SqliteStore, Store
from bot.store.sql import PostgresStore
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlackApi

from ..store import pg_cluster
from .conftest import Workspace, demo_loop, wait_for
from .github_support import ISSUE, REPOSITORY, comment_delivery, deliver, gh, serve_github, slack, slack_block

pytestmark = pytest.mark.e2e
__all__ = ["gh", "slack"]  # the fixtures, imported for pytest

READERS = [f"reader{n}" for n in range(1, 7)]  # read permission only: each vote is refused, with an answer
ANSWER_MARKER = "<!-- loopbot:answer=github:comment:"


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, ws: Workspace) -> str:
    """The engine under the serve of ``ws``: SQLite in its state_dir, or a PostgreSQL schema of its own."""
    if request.param == "postgres":
        if pg_cluster.unavailable() is not None:
            pytest.skip(str(pg_cluster.unavailable()))
        ws.store = {"url": pg_cluster.url(), "schema": pg_cluster.schema_for(ws.root), "lease_seconds": 2}
    return str(request.param)


def _store(ws: Workspace) -> Store:
    if ws.store is None:
        return SqliteStore(Path(ws.state_dir))
    return PostgresStore(ws.store["url"], schema=ws.store["schema"])


def _pending(ws: Workspace, channel: str, action: str) -> list[Any]:
    return [t for t in _store(ws).pending_tasks() if (t.channel, t.action) == (channel, action)]


def _answers(gh: FakeGitHub) -> list[str]:
    """The marker line of every answer comment the bot made on the issue, in order."""
    return [c["body"].split("\n", 1)[0] for c in gh.comments_on(REPOSITORY, ISSUE)
            if c["user"]["login"] == gh.bot_login and c["body"].startswith(ANSWER_MARKER)]


def test_kill_9_inside_a_round_of_github_answers_leaves_one_reply_and_one_reaction_each(
        ws: Workspace, gh: FakeGitHub, engine: str) -> None:
    for login in READERS:
        gh.permissions[(REPOSITORY, login)] = "read"
    bot, review, _ = serve_github(ws, gh)
    votes = [gh.add_comment(REPOSITORY, ISSUE, "/approve", login) for login in READERS]
    reactions = r"^/repos/{}/issues/comments/{}/reactions$"
    replies = rf"^/repos/{REPOSITORY}/issues/{ISSUE}/comments$"

    # Round 1 is the first answer alone: it is held at its 👀 until the other five answers are stored.
    first_round = gh.stall("POST", reactions.format(REPOSITORY, votes[0]["id"]))
    deliver(bot, "issue_comment", comment_delivery(votes[0])).raise_for_status()
    wait_for(lambda: gh.calls_to("POST", reactions.format(REPOSITORY, votes[0]["id"])), timeout=15,
             what="round 1 to reach the first vote's 👀")
    for vote in votes[1:]:
        deliver(bot, "issue_comment", comment_delivery(vote)).raise_for_status()
    wait_for(lambda: len(_pending(ws, "github", "answer")) == len(votes), timeout=15,
             what="all six answers to be stored")

    # Round 2 holds the other five answers; its third reply comment is made on GitHub and its answer held back.
    in_round_two = gh.stall("POST", replies, skip=3)  # the first answer's reply, then two of round 2
    first_round.set()
    wait_for(lambda: len(_answers(gh)) == 4 and not gh.stalls, timeout=15,
             what="round 2's third reply comment to be made")
    assert len(_pending(ws, "github", "answer")) == 5, "round 1 finished; nothing of round 2 is finished yet"
    bot.kill9()
    in_round_two.set()
    assert len(_pending(ws, "github", "answer")) == 5, "the delivered part of round 2 is delivered again"

    ws.serve()
    wait_for(lambda: not _pending(ws, "github", "answer"), timeout=20, what="the restarted serve to empty the outbox")
    tried = [len(gh.calls_to("POST", reactions.format(REPOSITORY, vote["id"]))) for vote in votes]
    assert tried.count(4) == 3, f"three answers of round 2 were sent twice (👀 and 👎 each time): {tried}"
    answers = _answers(gh)
    assert sorted(answers) == sorted(f"{ANSWER_MARKER}{vote['id']}:refused -->" for vote in votes), answers
    for vote in votes:
        kinds = [kind for comment, kind, who in gh.reactions if comment == vote["id"] and who == gh.bot_login]
        assert sorted(kinds) == ["-1", "eyes"], (vote["id"], kinds)
    assert _store(ws).pending_tasks() == []
    assert (ws.review(review["id"]) or {}).get("status") == "open"  # refusals only: no vote was counted


SLACK_CHANNELS = ["C0ONE", "C0TWO", "C0SIX"]


def _slack_posts(slack: FakeSlackApi, review: dict[str, Any]) -> dict[str, list[str]]:
    """Per channel, the event type of every message the bot made for this review's run (parent and review)."""
    found: dict[str, list[str]] = {}
    for channel in SLACK_CHANNELS:
        kinds = []
        for message in slack.channel_messages(channel):
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if payload.get("run_id") == review["run"] or payload.get("review_id") == review["id"]:
                kinds.append(str(metadata.get("event_type")))
        found[channel] = sorted(kinds)
    return found


def test_kill_9_inside_a_round_of_slack_posts_leaves_one_message_per_post(ws: Workspace, slack: FakeSlackApi,
                                                                          engine: str) -> None:
    targets = [{"slack": {"channel": channel}} for channel in SLACK_CHANNELS]
    ws.write_config([demo_loop(run_on_start=True, review={"post_to": targets})], slack=slack_block(slack))

    # A first serve stores the review's three Slack posts and is killed inside the first one, so the next
    # serve's first round holds all three (the desk adds them one by one; a live thread may start on one).
    setup = slack.stall("chat.postMessage")
    first = ws.serve()
    review = ws.wait_open_review()
    wait_for(lambda: len(_pending(ws, "slack", "post")) == 3 and slack.calls_to("chat.postMessage"), timeout=15,
             what="the three Slack posts stored and the first one under way")
    first.kill9()
    setup.set()

    # The second serve delivers the first post (its run's parent is found), posts the second's parent, and is
    # killed while the second review message is made in Slack but not answered.
    in_round = slack.stall("chat.postMessage", skip=2)
    second = ws.serve()
    wait_for(lambda: len(slack.calls_to("chat.postMessage")) == 4, timeout=15,
             what="the second review message of the round to be made")
    # not finished: the round's delivered post and the one in Slack unanswered (PostgreSQL's leases, expiring one
    # by one after the first serve's kill, may have let the first post go in a round of its own)
    assert len(_pending(ws, "slack", "post")) in ((3,) if engine == "sqlite" else (2, 3))
    second.kill9()
    in_round.set()

    ws.serve()
    wait_for(lambda: not _pending(ws, "slack", "post"), timeout=20, what="the third serve to empty the outbox")
    def delivered() -> bool:
        return all(entry.get("delivered") for entry in (ws.review(review["id"]) or {}).get("targets", [{}]))

    wait_for(delivered, timeout=10, what="every target recorded as delivered")
    assert _slack_posts(slack, review) == {channel: sorted([EVENT_REVIEW, EVENT_RUN]) for channel in SLACK_CHANNELS}
    assert len(slack.calls_to("chat.postMessage")) == 6, "the third serve posted only the third channel's two"
    assert _store(ws).pending_tasks() == []
