"""GitHub end to end, what a person reads (#18): a 5,000-row proposal whole, long reasons, one outcome label.

Real ``loopbot serve`` processes against the fake GitHub, which refuses a
comment over 65,536 characters and a label removal the issue cannot take,
as GitHub does.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.github_api import FakeGitHub

from .big_proposal_loop import row
from .conftest import Workspace, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    TARGET,
    comment_delivery,
    deliver,
    gh,
    github_block,
    review_comment,
    serve_github,
    wait_review_comment,
)

pytestmark = pytest.mark.e2e
__all__ = ["gh"]  # the fixture, imported for pytest

OUTCOME_LABELS = {"loopbot:approved", "loopbot:rejected", "loopbot:retried", "loopbot:modified", "loopbot:paused"}


def ours(gh: FakeGitHub) -> list[dict[str, Any]]:
    return [c for c in gh.comments_on(REPOSITORY, ISSUE) if c["user"]["login"] == gh.bot_login]


def outcome_labels(gh: FakeGitHub) -> set[str]:
    return set(gh.labels_of(REPOSITORY, ISSUE)) & OUTCOME_LABELS


def test_a_5000_row_proposal_is_read_whole_on_github(ws: Workspace, gh: FakeGitHub) -> None:
    loop = {"name": "big", "factory": "tests.bot.e2e.big_proposal_loop:build", "run_on_start": True,
            "options": {"rows": 5000}, "review": {"post_to": [TARGET], "reviewers": {"github_users": ["alice"]}}}
    ws.write_config([loop], github=github_block(gh))
    bot = ws.serve()
    review = ws.wait_open_review("big", timeout=30)
    rid = review["id"]
    first = wait_review_comment(gh, rid)
    assert "## Approve to apply 5,000 label changes to octo/ops" in first["body"]
    total = int(first["body"].split(" · part 1 of ", 1)[1].split("\n", 1)[0])
    assert total >= 3

    def parts() -> list[dict[str, Any]] | None:
        more = [c for c in ours(gh) if c["body"].startswith(f"<!-- loopbot:more={rid}.review.")]
        return more if len(more) == total - 1 else None

    more = wait_for(parts, timeout=20, what=f"the {total - 1} comments that carry the proposal on")
    bodies = [first["body"]] + [c["body"] for c in more]
    assert [b.split(" -->", 1)[0] for b in bodies[1:]] == [f"<!-- loopbot:more={rid}.review.{n}"
                                                           for n in range(2, total + 1)]  # in order
    assert all(len(body) <= 65_536 for body in bodies)
    rows = [line for body in bodies for line in body.split("\n") if line.startswith("| #")]
    assert rows == ["| " + " | ".join(row(n)) + " |" for n in range(5000)]  # every row, once, in order
    assert "## How to answer" in first["body"] and "local-reviews" not in "".join(bodies)

    vote = gh.add_comment(REPOSITORY, ISSUE, "/approve", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    ws.wait_run(review["run"], "completed", timeout=30)
    wait_for(lambda: outcome_labels(gh) == {"loopbot:approved"}, what="the approved label")
    assert len([c for c in ours(gh) if c["body"].startswith(f"<!-- loopbot:more={rid}.")]) == total - 1


def test_a_3500_character_reject_reason_shows_the_outcome_and_lands_whole(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    rid = review["id"]
    reason = " ".join(f"word{n}" for n in range(600))[:3500]
    assert len(reason) == 3500
    vote = gh.add_comment(REPOSITORY, ISSUE, f"/reject {reason}", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    ws.wait_run(review["run"], "rejected")

    def shown() -> str | None:
        body = (review_comment(gh, rid) or {}).get("body", "")
        return body if "REJECT by github:alice" in body and f"Run {review['run']} rejected" in body else None

    body = wait_for(shown, what="the review comment showing the outcome and the run's end")
    assert "## How to answer" not in body and "…" in body and len(body) <= 65_536
    assert "waiting for a person" not in body
    whole = wait_for(lambda: [c for c in ours(gh) if "REJECT by github:alice" in c["body"]
                              and reason in c["body"] and not c["body"].startswith("<!-- loopbot:review=")],
                     what="the whole reason in a comment of its own")
    assert len(whole) == 1
    assert outcome_labels(gh) == {"loopbot:rejected"}
    assert "loopbot:awaiting-review" not in gh.labels_of(REPOSITORY, ISSUE)


def test_a_reason_naming_other_decisions_leaves_one_outcome_label_and_a_new_review_clears_it(
        ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    rid = review["id"]
    vote = gh.add_comment(REPOSITORY, ISSUE, "/reject not before APPROVE, PAUSE or RETRY from ops", "alice")
    assert deliver(bot, "issue_comment", comment_delivery(vote)).json() == {"votes": 1}
    ws.wait_run(review["run"], "rejected")
    wait_for(lambda: f"Run {review['run']} rejected" in (review_comment(gh, rid) or {}).get("body", ""),
             what="the run's end in the review comment")
    assert outcome_labels(gh) == {"loopbot:rejected"}

    assert ws.cli("run", "demo").returncode == 0  # a second review, on the same issue
    second = wait_for(lambda: next((r for r in ws.status()["reviews"] if r["status"] == "open"
                                    and r["id"] != rid), None), what="a second open review")
    wait_review_comment(gh, second["id"])
    wait_for(lambda: "loopbot:awaiting-review" in gh.labels_of(REPOSITORY, ISSUE), what="the awaiting label")
    assert outcome_labels(gh) == set()
    deletes = [c for c in gh.calls if c.method == "DELETE" and "/labels/" in c.path]
    assert deletes and all(c.status == 200 for c in deletes)  # only labels the issue had were removed
