"""GitHub end to end: real ``loopbot serve`` processes, the fake GitHub REST server, signed webhooks and polling.

A demo loop posts its review to octo/ops#42; people answer with comments
and labels, delivered by webhook (signed as GitHub signs) or read by the
poller; the run completes and the comment, labels and replies show it.
"""

from __future__ import annotations

import pytest

from tests.fakes.github_api import FakeGitHub

from .conftest import Workspace, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    comment_delivery,
    deliver,
    gh,
    github_block,
    github_loop,
    label_delivery,
    replies_to,
    review_comment,
    stored_review,
    votes_of,
    wait_review_comment,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh"]  # the fixture, imported for pytest


def test_webhook_approve_completes_the_run_and_github_shows_it(ws: Workspace, gh: FakeGitHub) -> None:
    ws.write_config([github_loop()], github=github_block(gh))
    bot = ws.serve()
    review = ws.wait_open_review()
    rid = review["id"]
    posted = wait_review_comment(gh, rid)
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
    ws.write_config([github_loop()], github=github_block(gh, webhook_secret=None, poll_interval="1s"))
    bot = ws.serve()
    review = ws.wait_open_review()
    rid = review["id"]
    wait_review_comment(gh, rid)
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
    ws.write_config([github_loop()], github=github_block(gh))
    bot = ws.serve()
    review = ws.wait_open_review()
    rid = review["id"]
    wait_review_comment(gh, rid)

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
