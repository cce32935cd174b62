"""GitHub end to end, how the bot is set up: an issue per run, reminders and escalations, App auth, catching up.

Real ``loopbot serve`` processes (restarted where the test says so) against
the fake GitHub REST server.
"""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from tests.fakes.github_api import FakeGitHub

from .conftest import Workspace, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    comment_delivery,
    deliver,
    gh,
    github_app_key,
    github_block,
    github_loop,
    review_comment,
    serve_github,
    votes_of,
    wait_review_comment,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh"]  # the fixture, imported for pytest


def _marked(gh: FakeGitHub, issue: int, marker: str) -> list[dict[str, Any]]:
    return [c for c in gh.comments_on(REPOSITORY, issue) if c["body"].startswith(marker)]


def _run_issues(gh: FakeGitHub) -> list[int]:
    with gh.lock:
        return sorted(n for (repo, n), issue in gh.issues.items()
                      if repo == REPOSITORY and "loopbot" in [label["name"] for label in issue["labels"]])


def test_a_target_without_issue_gets_one_issue_per_run_found_again_after_a_restart(
        ws: Workspace, gh: FakeGitHub) -> None:
    ws.write_config([github_loop(targets=[{"github": {"repository": REPOSITORY}}])], github=github_block(gh))
    first = ws.serve()
    review = ws.wait_open_review()
    opened = wait_for(lambda: _run_issues(gh), timeout=15, what="the run's own issue")
    assert opened == [ISSUE + 1]
    issue = gh.issues[(REPOSITORY, opened[0])]
    assert f"<!-- loopbot:run={review['run']} -->" in issue["body"] and review["run"] in issue["title"]
    wait_for(lambda: _marked(gh, opened[0], f"<!-- loopbot:review={review['id']} -->"), timeout=10,
             what="the review comment on the run's issue")
    assert not gh.comments_on(REPOSITORY, ISSUE)  # nothing on the other issue
    assert first.terminate() == 0

    bot = ws.serve()  # a fresh process: it must find the run's issue, not open another
    retry = gh.add_comment(REPOSITORY, opened[0], "/retry", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(retry, issue=opened[0])).json() == {"votes": 1}

    def second_review() -> dict[str, Any] | None:
        return next((r for r in ws.status()["reviews"] if r["status"] == "open" and r["id"] != review["id"]), None)

    second = wait_for(second_review, timeout=15, what="the retried run's next review")
    wait_for(lambda: _marked(gh, opened[0], f"<!-- loopbot:review={second['id']} -->"), timeout=10,
             what="the second review on the same issue")
    assert _run_issues(gh) == opened and len(gh.calls_to("POST", rf"^/repos/{REPOSITORY}/issues$")) == 1


def test_a_reminder_and_an_escalation_are_posted_to_github(ws: Workspace, gh: FakeGitHub) -> None:
    gh.add_issue(REPOSITORY, 7, title="Escalations")
    escalate_to = [{"github": {"repository": REPOSITORY, "issue": 7}}]
    loop = github_loop(timeout={"remind_after": "1s", "escalate_after": "2s", "escalate_to": escalate_to})
    ws.write_config([loop], github=github_block(gh))
    ws.serve()
    review = ws.wait_open_review()
    posted = wait_review_comment(gh, review["id"])

    def reminded() -> list[dict[str, Any]]:
        return [c for c in gh.comments_on(REPOSITORY, ISSUE) if f"Reminder: review {review['id']}" in c["body"]]

    (reminder,) = wait_for(reminded, timeout=15, what="a reminder on the review's issue")
    assert reminder["user"]["login"] == gh.bot_login and reminder["id"] != posted["id"]
    marker = f"<!-- loopbot:escalation={review['id']}"
    (escalation,) = wait_for(lambda: [c for c in gh.comments_on(REPOSITORY, 7) if c["body"].startswith(marker)],
                             timeout=15, what="the escalation on issue 7")
    assert f"Escalated: review {review['id']}" in escalation["body"]
    wait_for(lambda: "loopbot:awaiting-review" in gh.labels_of(REPOSITORY, 7), what="issue 7 awaiting review")
    assert ws.review(review["id"])["status"] == "open"
    assert len(reminded()) == 1 and review_comment(gh, review["id"])["id"] == posted["id"]


def test_github_app_auth_fetches_an_installation_token_and_uses_it(ws: Workspace, gh: FakeGitHub) -> None:
    key, pem = github_app_key()
    bot, review, _ = serve_github(ws, gh, token=None, app_id=4242, private_key=pem, installation_id=99)

    (exchange, *_) = gh.calls_to("POST", r"^/app/installations/99/access_tokens$")
    scheme, _, token = exchange.headers["authorization"].partition(" ")
    claims = jwt.decode(token, key.public_key(), algorithms=["RS256"])  # signed with the App's key
    assert scheme == "Bearer" and str(claims["iss"]) == "4242"
    posts = gh.calls_to("POST", rf"^/repos/{REPOSITORY}/issues/{ISSUE}/comments$")
    assert posts and all(c.headers["authorization"] == "token ghs_fake1" for c in posts)

    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    ws.wait_run(review["run"], "completed")
    assert gh.installation_tokens == ["ghs_fake1"]  # one token, reused while it is valid


def test_a_comment_made_while_serve_was_down_is_found_by_the_first_poll(ws: Workspace, gh: FakeGitHub) -> None:
    first, review, _ = serve_github(ws, gh, webhook_secret=None, poll_interval="30s")
    assert first.terminate() == 0

    gh.add_comment(REPOSITORY, ISSUE, "/approve while you were out", "alice")
    ws.serve()  # the next poll is 30 s away: only the poll at start can see it in time
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, review["id"]) == [("github:alice", "APPROVE", "github:poll")]


def test_a_serve_killed_right_after_commenting_finds_its_own_comment_after_restart(
        ws: Workspace, gh: FakeGitHub) -> None:
    release = gh.stall("POST", rf"^/repos/{REPOSITORY}/issues/{ISSUE}/comments$")  # made, the answer held back
    first, review, posted = serve_github(ws, gh)
    first.kill9()
    release.set()
    assert not ws.review(review["id"])["targets"][-1]["delivered"]  # the bot never heard back

    bot = ws.serve()
    wait_for(lambda: (ws.review(review["id"]) or {}).get("targets", [{}])[-1].get("delivered"), timeout=20,
             what="the restarted bot to record the GitHub comment as delivered")
    assert [c["id"] for c in _marked(gh, ISSUE, f"<!-- loopbot:review={review['id']} -->")] == [posted["id"]]

    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    ws.wait_run(review["run"], "completed")
    def edited() -> bool:
        return "APPROVE by github:alice" in (review_comment(gh, review["id"]) or {}).get("body", "")

    wait_for(edited, timeout=10, what="the one review comment edited with the outcome")
