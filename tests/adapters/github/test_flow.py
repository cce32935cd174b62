"""The pieces wired as the bot wires them: post a review, a signed webhook vote arrives, the voter is answered.

The "desk" here is a stand-in for the bot's vote path: it finds the review
whose ref matches the reply's context and answers DECIDED.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.testclient import TestClient

from adapters.channel import Answer, AnswerKind, MessageRef, Reply, Target
from adapters.github.channel import GitHubChannel
from adapters.github.client import GitHubClient
from adapters.github.poll import MemoryPollState, Poller, Watch
from adapters.github.webhook import webhook_route
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO, make_post
from .payloads import comment_payload, signed


def test_post_vote_by_webhook_answer_and_the_poller_agrees(channel: GitHubChannel, client: GitHubClient,
                                                           fake: FakeGitHub) -> None:
    ref = channel.post_request(Target("github", repository=REPO, issue=42), make_post())
    refs: dict[str, MessageRef] = {"triage-17": ref}
    counted: dict[str, Reply] = {}

    def submit(replies: list[Reply]) -> None:
        for reply in replies:
            assert reply.dedupe_key is not None and reply.context is not None
            if reply.dedupe_key in counted:
                channel.answer(reply.respond, Answer(AnswerKind.DUPLICATE, "already counted"))
                continue
            counted[reply.dedupe_key] = reply
            (review_id,) = [rid for rid, r in refs.items() if r.matches(reply.context)]
            channel.answer(reply.respond, Answer(AnswerKind.DECIDED, f"approved {review_id}", review_id))

    seen: set[str] = set()

    def accept(key: str, replies: list[Reply]) -> bool:
        new = key not in seen
        seen.add(key)
        if new:
            submit(replies)
        return new

    app = Starlette(routes=[webhook_route(["s3cret"], lambda batch: [accept(*each) for each in batch],
                                          bot_login=fake.bot_login)])
    vote = fake.add_comment(REPO, 42, "/approve", "alice")
    payload = comment_payload("/approve", "alice", comment_id=vote["id"])
    payload["repository"]["full_name"] = REPO
    payload["issue"]["number"] = 42
    payload["comment"]["created_at"] = vote["created_at"]
    body, headers = signed("issue_comment", payload, secret="s3cret")
    assert TestClient(app).post("/github/webhook", content=body, headers=headers).json() == {"votes": 1}

    assert fake.reactions == [(vote["id"], "eyes", fake.bot_login), (vote["id"], "rocket", fake.bot_login)]
    answer = fake.comments_on(REPO, 42)[-1]["body"]
    assert "@alice approved triage-17" in answer and "> /approve" in answer

    # the same comment read by polling is the same delivery: refused by its key, counted once
    Poller(client, MemoryPollState(), accept, bot_login=fake.bot_login).poll_once(
        [Watch(REPO, 42, since=fake.clock().replace(year=2000))]
    )
    assert list(counted) == [f"github:comment:{vote['id']}"]
    assert len(fake.comments_on(REPO, 42)) == 3  # review, vote, one answer
