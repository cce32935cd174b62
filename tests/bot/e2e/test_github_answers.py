"""GitHub end to end, the other answers: a refused voter, reject / retry / modify / pause by comment or label, teams.

Real ``loopbot serve`` processes, the fake GitHub REST server and signed
``issue_comment`` webhooks built from the real fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.store import SqliteStore
from tests.fakes.github_api import FakeGitHub

from .conftest import Bot, Workspace, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    comment_delivery,
    deliver,
    gh,
    github_loop,
    label_delivery,
    replies_to,
    serve_github,
    votes_of,
    wait_review_comment,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh"]  # the fixture, imported for pytest


def _comment(bot: Bot, gh: FakeGitHub, body: str, login: str) -> dict[str, Any]:
    comment = gh.add_comment(REPOSITORY, ISSUE, body, login)
    answer = deliver(bot, "issue_comment", comment_delivery(comment))
    assert answer.status_code in (200, 202), answer.text
    return comment


def _reply(gh: FakeGitHub, login: str, count: int = 1) -> str:
    found = wait_for(lambda: (lambda r: r if len(r) >= count else None)(replies_to(gh, login)), timeout=10,
                     what=f"reply {count} to @{login}")
    return str(found[count - 1]["body"])


def test_a_voter_with_read_permission_is_refused_and_told_why_and_who_may(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    vote = _comment(bot, gh, "/approve", "mallory")
    said = _reply(gh, "mallory")
    assert "mallory has read permission on octo/ops" in said and "at least write" in said, said
    wait_for(lambda: (vote["id"], "-1", gh.bot_login) in gh.reactions, what="a 👎 on the refused vote")
    assert votes_of(ws, review["id"]) == [] and ws.review(review["id"])["status"] == "open"

    _comment(bot, gh, "/approve", "alice")  # someone with write may
    ws.wait_run(review["run"], "completed")


def test_a_voter_outside_the_named_reviewers_is_told_who_may(ws: Workspace, gh: FakeGitHub) -> None:
    gh.permissions[(REPOSITORY, "carol")] = "admin"
    bot, review, _ = serve_github(ws, gh, github_loop(reviewers={"github_users": ["alice", "bob"]}))
    _comment(bot, gh, "/approve", "carol")
    said = _reply(gh, "carol")
    assert "carol is not one of this loop's GitHub reviewers (alice, bob)" in said, said
    assert votes_of(ws, review["id"]) == []


def test_reject_by_comment_ends_the_run_with_the_reason(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    _comment(bot, gh, "/reject the labels are wrong", "bob")
    run = ws.wait_run(review["run"], "rejected")
    assert "the labels are wrong" in run["reason"], run
    assert votes_of(ws, review["id"]) == [("github:bob", "REJECT", "github:webhook")]
    wait_for(lambda: "loopbot:rejected" in gh.labels_of(REPOSITORY, ISSUE), what="the rejected label")


def test_retry_then_modify_by_comment_reach_the_run(ws: Workspace, gh: FakeGitHub) -> None:
    bot, first, _ = serve_github(ws, gh)
    _comment(bot, gh, "/retry", "alice")

    def second_review() -> dict[str, Any] | None:
        return next((r for r in ws.status()["reviews"] if r["status"] == "open" and r["id"] != first["id"]), None)

    second = wait_for(second_review, timeout=15, what="the retried step to ask again")
    assert second["run"] == first["run"]
    assert votes_of(ws, first["id"]) == [("github:alice", "RETRY", "github:webhook")]
    wait_review_comment(gh, second["id"])

    _comment(bot, gh, "/modify context.note=checked context.items=3", "alice")  # no id: one review is open here
    ws.wait_run(first["run"], "completed")
    assert votes_of(ws, second["id"]) == [("github:alice", "MODIFY", "github:webhook")]
    snapshot = SqliteStore(Path(ws.state_dir)).load_snapshot(first["run"]) or {}
    context = snapshot["context"]["initial_context"]
    assert context["note"] == "checked" and context["items"] == 3, context
    wait_for(lambda: "loopbot:modified" in gh.labels_of(REPOSITORY, ISSUE), what="the modified label")


def test_github_teams_admit_an_active_member_and_refuse_others(ws: Workspace, gh: FakeGitHub) -> None:
    gh.teams[("octo", "reviewers", "carol")] = "active"
    gh.teams[("octo", "reviewers", "dave")] = "pending"  # an invitation is not a membership
    bot, review, _ = serve_github(ws, gh, github_loop(reviewers={"github_teams": ["octo/reviewers"]}))

    _comment(bot, gh, "/approve", "dave")
    said = _reply(gh, "dave")
    assert "dave is not one of this loop's GitHub reviewers (octo/reviewers)" in said, said
    assert votes_of(ws, review["id"]) == []

    _comment(bot, gh, "/approve", "carol")
    ws.wait_run(review["run"], "completed")
    assert votes_of(ws, review["id"]) == [("github:carol", "APPROVE", "github:webhook")]
    assert gh.calls_to("GET", r"^/orgs/octo/teams/reviewers/memberships/carol$")


def test_pause_by_comment_and_by_label_quiets_the_review_and_a_later_approve_decides(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    _comment(bot, gh, "/pause 2h", "alice")
    assert "paused until" in _reply(gh, "alice"), "the voter is told how long"
    stored = ws.review(review["id"])
    assert stored["status"] == "open" and stored["paused_until"], stored

    gh.add_label_event(REPOSITORY, ISSUE, "loopbot:pause", "bob")
    answer = deliver(bot, "issues", label_delivery("loopbot:pause", "bob"))
    assert answer.status_code == 200 and answer.json() == {"votes": 1}, answer.text
    assert "(added the label loopbot:pause)" in _reply(gh, "bob")
    assert votes_of(ws, review["id"]) == [("github:alice", "PAUSE", "github:webhook"),
                                          ("github:bob", "PAUSE", "github:webhook")]
    assert ws.review(review["id"])["status"] == "open"

    _comment(bot, gh, "/approve", "alice")  # a pause is no decision: the review still takes one
    ws.wait_run(review["run"], "completed")
