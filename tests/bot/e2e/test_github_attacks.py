"""GitHub end to end, as an attacker tries it: answers from elsewhere, a marker posted first, replays, doubles.

Real ``loopbot serve`` processes against the fake GitHub REST server, with
signed webhooks built from the real fixtures (issue #23).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.fakes.github_api import FakeGitHub

from .conftest import Bot, Workspace, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    comment_delivery,
    deliver,
    gh,
    github_app_key,
    github_block,
    github_loop,
    label_delivery,
    replies_to,
    serve_github,
    stored_review,
    votes_of,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh"]  # the fixture, imported for pytest

SANDBOX = "mallory/sandbox"  # a repository mallory administers; on octo/ops she may only read


def _bots_review_comment(gh: FakeGitHub, review_id: str) -> dict[str, Any]:
    marker = f"<!-- loopbot:review={review_id} -->"

    def posted() -> dict[str, Any] | None:
        return next((c for c in gh.comments_on(REPOSITORY, ISSUE)
                     if c["body"].startswith(marker) and c["user"]["login"] == gh.bot_login), None)

    return wait_for(posted, timeout=15, what=f"loopbot's own review comment of {review_id}")


def _serve(ws: Workspace, gh: FakeGitHub, **block: Any) -> tuple[Bot, dict[str, Any]]:
    bot, review, _ = serve_github(ws, gh, **block)
    _bots_review_comment(gh, review["id"])  # not just any comment with its marker
    return bot, review


def _github_post(ws: Workspace, review_id: str) -> dict[str, Any]:
    """The message data of the review's GitHub post, once the bot has recorded it."""
    return wait_for(lambda: next((p["data"] for p in stored_review(ws, review_id).posts if p["channel"] == "github"),
                                 None), what=f"the GitHub post of {review_id} recorded")


def _refused(gh: FakeGitHub, comment: dict[str, Any]) -> None:
    wait_for(lambda: (comment["id"], "-1", gh.bot_login) in gh.reactions, what=f"a 👎 on comment {comment['id']}")


def _second_of(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _app_block() -> dict[str, Any]:
    _, pem = github_app_key()
    return {"token": None, "app_id": 4242, "private_key": pem, "installation_id": 99}


# --- finding 1: answers from another repository, another issue ---------------------------------------

def test_a_reader_approving_on_a_repository_of_her_own_decides_nothing(ws: Workspace, gh: FakeGitHub) -> None:
    gh.add_issue(SANDBOX, 1, title="my playground")
    gh.permissions[(SANDBOX, "mallory")] = "admin"
    bot, review = _serve(ws, gh)

    vote = gh.add_comment(SANDBOX, 1, f"/approve {review['id']}", "mallory")
    assert deliver(bot, "issue_comment", comment_delivery(vote, repository=SANDBOX, issue=1)).status_code == 200
    _refused(gh, vote)
    assert votes_of(ws, review["id"]) == [] and ws.review(review["id"])["status"] == "open"
    assert not gh.calls_to("GET", rf"^/repos/{SANDBOX}/collaborators/")  # her role there is beside the point
    said = [c["body"] for c in gh.comments_on(SANDBOX, 1) if c["user"]["login"] == gh.bot_login]
    assert len(said) == 1 and "only as a comment or label on the review's own GitHub issue" in said[0], said
    assert REPOSITORY not in said[0]  # the review's place is not told to whoever asks from elsewhere


def test_a_writer_approving_on_another_issue_of_the_repository_decides_nothing(
        ws: Workspace, gh: FakeGitHub) -> None:
    gh.add_issue(REPOSITORY, 7, title="something else")
    bot, review = _serve(ws, gh)

    vote = gh.add_comment(REPOSITORY, 7, f"/approve {review['id']}", "alice")  # alice may write on octo/ops
    assert deliver(bot, "issue_comment", comment_delivery(vote, issue=7)).status_code == 200
    label = gh.add_label_event(REPOSITORY, 7, "loopbot:approve", "bob")
    deliver(bot, "issues", label_delivery("loopbot:approve", "bob", issue=7, at=label["created_at"]))
    _refused(gh, vote)
    assert votes_of(ws, review["id"]) == []

    on_its_issue = gh.add_comment(REPOSITORY, ISSUE, f"/approve {review['id']}", "alice")
    deliver(bot, "issue_comment", comment_delivery(on_its_issue))
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, review["id"]) == [("github:alice", "APPROVE", "github:webhook")]


# --- finding 2: a marker posted first ------------------------------------------------------------------

@pytest.mark.parametrize("how", ["app", "post-only", "user-fails-at-start"])
def test_a_marker_posted_first_is_not_taken_for_loopbots_own_comment(
        ws: Workspace, gh: FakeGitHub, how: str) -> None:
    bait = gh.add_comment(REPOSITORY, ISSUE, "<!-- loopbot:review=demo-1 -->\nlooks like loopbot", "mallory")
    block: dict[str, Any] = {"app": _app_block(), "post-only": {"webhook_secret": None}}.get(how, {})
    if how == "user-fails-at-start":
        gh.fail("GET", r"^/user$", 500, times=2)  # at start, and once more: the post waits until it knows
    ws.write_config([github_loop()], github=github_block(gh, **block))
    bot = ws.serve()
    review = ws.wait_open_review()
    assert review["id"] == "demo-1"

    own = _bots_review_comment(gh, review["id"])
    assert own["id"] != bait["id"]
    assert _github_post(ws, "demo-1")["comment_id"] == own["id"]
    if how != "post-only":
        vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
        deliver(bot, "issue_comment", comment_delivery(vote))
        ws.wait_run(review["run"], "completed")
        wait_for(lambda: "APPROVE by github:alice" in gh.comments[own["id"]]["body"], what="the outcome")
    assert not gh.calls_to("PATCH", rf"/issues/comments/{bait['id']}$")
    assert gh.comments[bait["id"]]["body"].endswith("looks like loopbot")


# --- finding 4: replays ----------------------------------------------------------------------------------

def test_a_replayed_comment_under_a_fresh_delivery_id_is_no_vote_on_the_next_review(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, first = _serve(ws, gh)
    retry = gh.add_comment(REPOSITORY, ISSUE, "/retry", "alice")
    captured = json.dumps(comment_delivery(retry)).encode()
    assert deliver(bot, "issue_comment", captured).json() == {"votes": 1}
    second = wait_for(lambda: next((r for r in ws.status()["reviews"]
                                    if r["status"] == "open" and r["id"] != first["id"]), None),
                      timeout=15, what="the retried step's review")
    _bots_review_comment(gh, second["id"])

    replay = deliver(bot, "issue_comment", captured)  # the same signed bytes, a new X-GitHub-Delivery
    assert replay.status_code == 200 and replay.json() == {"duplicate": f"github:comment:{retry['id']}"}
    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "bob")
    deliver(bot, "issue_comment", comment_delivery(vote))
    ws.wait_run(first["run"], "completed")
    assert [v.voter for v in stored_review(ws, second["id"]).history] == ["github:bob"]


def test_a_replayed_label_under_a_fresh_delivery_id_is_no_vote_on_the_next_review(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, first = _serve(ws, gh)
    label = gh.add_label_event(REPOSITORY, ISSUE, "loopbot:retry", "alice")
    captured = json.dumps(label_delivery("loopbot:retry", "alice", at=label["created_at"])).encode()
    assert deliver(bot, "issues", captured).json() == {"votes": 1}
    second = wait_for(lambda: next((r for r in ws.status()["reviews"]
                                    if r["status"] == "open" and r["id"] != first["id"]), None),
                      timeout=15, what="the retried step's review")
    _bots_review_comment(gh, second["id"])

    replay = deliver(bot, "issues", captured)
    assert replay.status_code == 200 and "duplicate" in replay.json(), replay.text
    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "bob")
    deliver(bot, "issue_comment", comment_delivery(vote))
    ws.wait_run(first["run"], "completed")
    assert [v.voter for v in stored_review(ws, second["id"]).history] == ["github:bob"]


# --- finding 10: a label counted twice, an empty secret, an edited comment polled ----------------------

def test_a_label_seen_by_the_webhook_and_the_poller_counts_once(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review = _serve(ws, gh, poll_interval="1s")
    label = gh.add_label_event(REPOSITORY, ISSUE, "loopbot:pause", "bob")
    answer = deliver(bot, "issues", label_delivery("loopbot:pause", "bob", at=label["created_at"]))
    assert answer.json() == {"votes": 1}
    # a poll that began after the label was added has read it and submitted it before the next one begins
    seen = len(gh.calls_to("GET", rf"^/repos/{REPOSITORY}/issues/{ISSUE}/events$"))
    wait_for(lambda: len(gh.calls_to("GET", rf"^/repos/{REPOSITORY}/issues/{ISSUE}/events$")) >= seen + 2,
             timeout=10, what="two polls of the issue's events after the label")
    wait_for(lambda: replies_to(gh, "bob"), what="the answer to bob")
    assert [v.voter for v in stored_review(ws, review["id"]).history] == ["github:bob"]
    assert len(replies_to(gh, "bob")) == 1


def test_an_empty_webhook_secret_is_refused_by_check_and_serve(ws: Workspace, gh: FakeGitHub) -> None:
    ws.write_config([github_loop()], github=github_block(gh, webhook_secret=" , "))
    for command in (["check", "--offline"], ["serve"]):
        done = ws.cli(*command)
        assert done.returncode != 0, (command, done.stdout, done.stderr)
        assert "github.webhook_secret" in done.stderr and "is empty" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_a_comment_edited_before_the_poller_read_it_is_not_counted(ws: Workspace, gh: FakeGitHub) -> None:
    ws.write_config([github_loop()], github=github_block(gh, webhook_secret=None, poll_interval="30s"))
    first = ws.serve()
    review = ws.wait_open_review()
    _bots_review_comment(gh, review["id"])
    assert first.terminate() == 0

    edited = gh.add_comment(REPOSITORY, ISSUE, "/reject not like this", "alice")
    with gh.lock:  # alice changes her mind while the bot is down: the text it would read is not what she wrote
        edited["body"] = "/approve"
        edited["updated_at"] = (_second_of(edited["created_at"]) + timedelta(seconds=5)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    gh.add_comment(REPOSITORY, ISSUE, "/approve", "bob")
    ws.serve()  # the poll at start reads both
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, review["id"]) == [("github:bob", "APPROVE", "github:poll")]


# --- finding 3, the identity half: loopbot's own comment is never a vote ---------------------------------

def test_loopbots_own_comment_with_a_command_line_is_no_vote_while_it_cannot_learn_its_login(
        ws: Workspace) -> None:
    with FakeGitHub(bot_login="loopbot-user") as fake:  # a token's user: a User, not a Bot
        fake.add_issue(REPOSITORY, ISSUE, title="Ops reviews")
        fake.permissions[(REPOSITORY, "loopbot-user")] = "admin"  # the bot's token may well write
        fake.permissions[(REPOSITORY, "alice")] = "write"
        ws.write_config([github_loop()], github=github_block(fake, webhook_secret=None, poll_interval="30s"))
        first = ws.serve()
        review = ws.wait_open_review()
        own = _bots_review_comment(fake, review["id"])
        assert first.terminate() == 0
        with fake.lock:  # a review cut mid-line once let a line of loopbot's own comment start with /yes
            own["body"] += "\n/yes\n"
        fake.fail("GET", r"^/user$", 500, times=10**6)  # from now on loopbot cannot tell who it is
        fake.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
        ws.serve()  # the poll at start reads both comments
        ws.wait_run(review["run"], "completed")
        assert votes_of(ws, review["id"]) == [("github:alice", "APPROVE", "github:poll")]
