"""GitHub end to end: real ``loopbot serve`` processes, the fake GitHub REST server, signed webhooks and polling.

A demo loop posts its review to octo/ops#42; people answer with comments
and labels, delivered by webhook (signed as GitHub signs) or read by the
poller; the run completes and the comment, labels and replies show it.
"""

from __future__ import annotations

import json
import time

import pytest

from adapters.github.webhook import MAX_BODY_BYTES

from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlackApi

from .conftest import Workspace, wait_for
from .github_support import (
    FIXTURES,
    ISSUE,
    REPOSITORY,
    SLACK_CHANNEL,
    TARGET,
    comment_delivery,
    deliver,
    gh,
    github_block,
    github_loop,
    label_delivery,
    replies_to,
    review_comment,
    serve_github,
    slack,
    slack_block,
    slash,
    stored_review,
    votes_of,
    wait_review_comment,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh", "slack"]  # the fixtures, imported for pytest


def test_webhook_approve_completes_the_run_and_github_shows_it(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, posted = serve_github(ws, gh)
    rid = review["id"]
    assert posted["user"]["login"] == gh.bot_login
    wait_for(lambda: "loopbot:awaiting-review" in gh.labels_of(REPOSITORY, ISSUE), what="the awaiting label")

    vote = gh.add_comment(REPOSITORY, ISSUE, "Looks fine.\n/approve ship it", "alice")
    answer = deliver(bot, "issue_comment", comment_delivery(vote))
    assert answer.status_code == 200 and answer.json() == {"votes": 1}, answer.text

    run = ws.wait_run(review["run"], "completed")
    assert run["review"] == rid
    assert [v[:2] for v in votes_of(ws, rid)] == [("github:alice", "APPROVE")]
    assert stored_review(ws, rid).outcome is not None

    def shown() -> bool:
        body = (review_comment(gh, rid) or {}).get("body", "")
        labels = gh.labels_of(REPOSITORY, ISSUE)
        return ("APPROVE by github:alice" in body and "loopbot:approved" in labels
                and "loopbot:awaiting-review" not in labels)

    wait_for(shown, what="the review comment edited with the outcome and the labels swapped")
    assert review_comment(gh, rid)["id"] == posted["id"]  # edited in place, not posted again
    wait_for(lambda: replies_to(gh, "alice"), what="a reply comment to alice")
    assert [r for r in gh.reactions if r[0] == vote["id"]] == [(vote["id"], "eyes", gh.bot_login),
                                                               (vote["id"], "rocket", gh.bot_login)]
    assert "> /approve ship it" in replies_to(gh, "alice")[0]["body"]

    def final_comment() -> list[dict[str, object]]:
        return [c for c in gh.comments_on(REPOSITORY, ISSUE)
                if c["user"]["login"] == gh.bot_login and "completed" in str(c["body"]).lower()
                and not str(c["body"]).startswith(f"<!-- loopbot:review={rid}")]

    wait_for(final_comment, what="a comment saying the run ended")
    review_comments = [c for c in gh.comments_on(REPOSITORY, ISSUE)
                       if c["body"].startswith(f"<!-- loopbot:review={rid} -->")]
    assert len(review_comments) == 1


IGNORED = (
    "Not commands, all of them:\n"
    "```\n/approve\n```\n"
    "> /approve\n"
    "<!-- /approve -->\n"
    "<!--\n/reject no\n-->\n"
)


def test_polling_only_reads_an_approve_and_ignores_quoted_commands(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh, webhook_secret=None, poll_interval="1s")
    rid = review["id"]
    assert deliver(bot, "ping", b"{}").status_code == 404  # no secret: no webhook route at all

    ignored = gh.add_comment(REPOSITORY, ISSUE, IGNORED, "alice")
    polled = len(gh.calls_to("GET", rf"/repos/{REPOSITORY}/issues/{ISSUE}/comments$"))
    # two more polls of the comments: the ignored comment has been read by then
    wait_for(lambda: len(gh.calls_to("GET", rf"/repos/{REPOSITORY}/issues/{ISSUE}/comments$")) >= polled + 2,
             timeout=10, what="two more polls")
    assert votes_of(ws, rid) == [] and ws.review(rid)["status"] == "open"
    assert not [r for r in gh.reactions if r[0] == ignored["id"]]

    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, rid) == [("github:alice", "APPROVE", "github:poll")]
    wait_for(lambda: replies_to(gh, "alice"), what="a reply comment to alice")
    wait_for(lambda: (vote["id"], "rocket", gh.bot_login) in gh.reactions, what="the rocket on the vote")


def test_label_approves_and_commands_in_code_quotes_and_html_comments_are_ignored(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    rid = review["id"]

    ignored = gh.add_comment(REPOSITORY, ISSUE, IGNORED, "alice")
    answer = deliver(bot, "issue_comment", comment_delivery(ignored))
    assert answer.status_code == 202 and answer.json() == {"votes": 0}
    assert votes_of(ws, rid) == [] and ws.review(rid)["status"] == "open"

    gh.add_label_event(REPOSITORY, ISSUE, "loopbot:approve", "bob")
    answer = deliver(bot, "issues", label_delivery("loopbot:approve", "bob"))
    assert answer.status_code == 200 and answer.json() == {"votes": 1}, answer.text
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, rid) == [("github:bob", "APPROVE", "github:webhook")]
    wait_for(lambda: replies_to(gh, "bob"), what="a reply comment to bob")
    assert "(added the label loopbot:approve)" in replies_to(gh, "bob")[0]["body"]
    assert not [r for r in gh.reactions if r[0] == ignored["id"]]


def test_n_of_m_across_github_and_slack_counts_a_person_once(ws: Workspace, gh: FakeGitHub,
                                                               slack: FakeSlackApi) -> None:
    loop = github_loop(
        targets=[{"slack": {"channel": SLACK_CHANNEL}}, TARGET], approvals_required=2,
        reviewers={"slack_users": ["U0AAA"], "github_users": ["alice", "bob"]},
    )
    ws.write_config([loop], github=github_block(gh), slack=slack_block(slack),
                    people=[{"name": "alice", "github": "alice", "slack": "U0AAA"}])
    bot = ws.serve()
    review = ws.wait_open_review()
    rid = review["id"]
    wait_review_comment(gh, rid)
    wait_for(lambda: slack.channel_messages(SLACK_CHANNEL), what="the review in Slack")

    on_slack = slash(bot, slack, f"approve {rid}", "U0AAA", "alice")
    assert on_slack.status_code == 200, on_slack.text
    wait_for(lambda: votes_of(ws, rid), what="alice's Slack vote")
    assert ws.review(rid)["approvals"] == 1

    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    wait_for(lambda: replies_to(gh, "alice"), what="the answer to alice on GitHub")
    assert "1 of 2" in replies_to(gh, "alice")[0]["body"], replies_to(gh, "alice")[0]["body"]
    status = ws.review(rid)
    assert status["status"] == "open" and status["approvals"] == 1

    decisive = gh.add_comment(REPOSITORY, ISSUE, "/lgtm", "bob")
    assert deliver(bot, "issue_comment", comment_delivery(decisive)).json() == {"votes": 1}
    ws.wait_run(review["run"], "completed")
    decided_by = stored_review(ws, rid).outcome.decided_by  # type: ignore[union-attr]
    assert "github:bob" in decided_by and len(decided_by) == 2, decided_by


def _comment_polls(gh: FakeGitHub) -> int:
    return len(gh.calls_to("GET", rf"/repos/{REPOSITORY}/issues/{ISSUE}/comments$"))


def test_redelivery_and_webhook_plus_poll_count_once_and_bad_requests_record_nothing(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh, github_loop(approvals_required=2), poll_interval="1s")
    rid = review["id"]

    def state() -> dict[str, str]:
        return {k: v for k, v in ws.fingerprint().items() if k != "github-poll.json"}  # the poll cursor moves

    before = state()
    # The poll must not read the comment before the webhook brings it (the checks below take a while, a 25 MB
    # body among them): the issue's comment listing fails until the webhook has counted the vote.
    gh.fail("GET", rf"^/repos/{REPOSITORY}/issues/{ISSUE}/comments$", 503, times=10**6)
    held = gh.failures[-1]
    # one listing refused: the poller asks one request at a time, so none that began before the hold is still out
    wait_for(lambda: held.times < 10**6, timeout=10, what="a poll of the issue's comments to be held back")
    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    payload = comment_delivery(vote)
    body = json.dumps(payload).encode()
    assert deliver(bot, "issue_comment", body, signature="sha256=" + "0" * 64).status_code == 401
    assert deliver(bot, "issue_comment", body, secret="not-the-secret").status_code == 401
    assert deliver(bot, "issue_comment", body, signature="").status_code == 401
    assert deliver(bot, "issue_comment", b'{"action": "created", "comment": ').status_code == 400
    assert deliver(bot, "issue_comment", b"[1, 2]").status_code == 400
    unknown = deliver(bot, "push", payload)
    assert 200 <= unknown.status_code < 300 and unknown.json() == {"ignored": "push"}
    assert deliver(bot, "ping", json.loads((FIXTURES / "ping.json").read_text())).json() == {"msg": "pong"}
    oversized = deliver(bot, "issue_comment", b" " * (MAX_BODY_BYTES + 1))
    assert oversized.status_code == 413
    assert state() == before and votes_of(ws, rid) == []

    delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert deliver(bot, "issue_comment", payload, delivery=delivery).json() == {"votes": 1}
    with gh.lock:
        held.times = 0  # the poll reads the comment again from now on
    again = deliver(bot, "issue_comment", payload, delivery=delivery)  # a redelivery from GitHub's UI
    key = f"github:comment:{vote['id']}"  # what the signed body says, not the delivery header
    assert again.status_code == 200 and again.json() == {"duplicate": key}
    anew = deliver(bot, "issue_comment", payload)  # the same comment under another delivery id
    assert anew.status_code == 200 and anew.json() == {"duplicate": key}
    polls = _comment_polls(gh)
    wait_for(lambda: _comment_polls(gh) >= polls + 2, timeout=10, what="two polls that read the comment too")

    assert votes_of(ws, rid) == [("github:alice", "APPROVE", "github:webhook")]
    status = ws.review(rid)
    assert status["status"] == "open" and status["approvals"] == 1
    wait_for(lambda: replies_to(gh, "alice"), what="the answer to alice")
    assert len(replies_to(gh, "alice")) == 1
    assert [r for r in gh.reactions if r[0] == vote["id"]] == [(vote["id"], "eyes", gh.bot_login),
                                                               (vote["id"], "rocket", gh.bot_login)]


@pytest.mark.parametrize("status", [403, 429])
def test_a_rate_limited_review_comment_waits_and_posts_once_while_slack_is_not_delayed(
        ws: Workspace, gh: FakeGitHub, slack: FakeSlackApi, status: int) -> None:
    comments = rf"^/repos/{REPOSITORY}/issues/{ISSUE}/comments$"
    gh.fail("POST", comments, status, times=1, headers={"Retry-After": "1"})
    loop = github_loop(targets=[TARGET, {"slack": {"channel": SLACK_CHANNEL}}])
    ws.write_config([loop], github=github_block(gh), slack=slack_block(slack))
    ws.serve()

    refused = wait_for(lambda: [c for c in gh.calls_to("POST", comments) if c.status == status], timeout=15,
                       what=f"the first review comment refused with {status}")[0]
    # the run's message and the review in its thread, while GitHub's delivery thread waits out Retry-After
    wait_for(lambda: len(slack.calls_to("chat.postMessage")) >= 2, timeout=5, what="the review in Slack")
    assert time.monotonic() - refused.at < 0.9, "Slack waited for GitHub's Retry-After"
    assert not gh.comments_on(REPOSITORY, ISSUE)

    rid = ws.wait_open_review()["id"]
    posted = wait_review_comment(gh, rid)
    attempts = gh.calls_to("POST", comments)
    assert [c.status for c in attempts] == [status, 201]
    assert attempts[1].at - refused.at >= 0.9  # the outbox waited out Retry-After: 1
    assert [c["id"] for c in gh.comments_on(REPOSITORY, ISSUE)] == [posted["id"]]
    wait_for(lambda: "loopbot:awaiting-review" in gh.labels_of(REPOSITORY, ISSUE), what="the awaiting label")
