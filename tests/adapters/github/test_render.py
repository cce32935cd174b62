"""The review comment: marker, what is asked, the proposal, who and how, the details; outcomes, escaping, the cap."""

from __future__ import annotations

import pytest

from adapters.commands import parse_comment
from adapters.github.render import (
    MAX_COMMENT_CHARS,
    outcome_key,
    outcomes_in,
    render_escalation,
    render_review,
    truncate_middle,
)

from loop_engine.proposal import Proposal, Table

from .conftest import make_post


def entries(*texts: str) -> list[tuple[str, str]]:
    return [(outcome_key(text), text) for text in texts]


def test_marker_first_then_who_then_the_request() -> None:
    body = render_review(make_post(approvals_required=2))
    assert body.startswith("<!-- loopbot:review=triage-17 -->\n")
    assert "needs 2 approvals of these 2: @alice, @bob" in body
    assert body.index("## Apply 3 labels") < body.index("## How to answer") < body.index("Who can answer")
    assert body.index("Who can answer") < body.index("<details><summary>Details</summary>")
    for word in ("`/approve [note]`", "`/reject <reason>`", "`/retry [hint]`", "`/modify context.KEY=VALUE ...`",
                 "`/pause 2h`", "`loopbot:approve`", "`loopbot:reject`", "`loopbot:retry`", "`loopbot:pause`"):
        assert word in body


def test_the_hint_when_no_github_logins() -> None:
    body = render_review(make_post(reviewers={}, reviewers_hint="the ops team"))
    assert "needs 1 approval of: the ops team" in body
    assert "anyone who can comment here" in render_review(make_post(reviewers={}))


def test_the_bots_own_comment_holds_no_command() -> None:
    post = make_post()
    post.request.proposed_action = "label them\n/approve"
    post.request.state_summary["note"] = "line one\n/approve"
    assert parse_comment(render_review(post)) == []
    assert parse_comment(render_escalation(post, "Escalated: /approve now")) == []
    decided = render_review(make_post(status="decided"), entries("Decided: REJECT - reason\n/approve"))
    assert parse_comment(decided) == []


def test_outcome_replaces_how_to_answer_and_round_trips() -> None:
    outcomes = entries("Decided: REJECT by github:bob - <!-- /loopbot:outcome --> <b>sneaky</b> & co", "Run ended")
    body = render_review(make_post(status="decided"), outcomes)
    assert "## How to answer" not in body and "## Outcome" in body
    assert "<b>" not in body and body.count("<!-- /loopbot:outcome -->") == 2
    assert outcomes_in(body) == outcomes


def test_closed_without_text_says_its_status() -> None:
    assert "This review is applied." in render_review(make_post(status="applied"))


def test_huge_details_are_cut_in_the_middle_and_say_so() -> None:
    post = make_post()
    post.request.state_summary["log"] = "y" * 300_000
    body = render_review(post)
    assert len(body) <= MAX_COMMENT_CHARS < 65_536
    assert "characters left out: of the details" in body
    assert body.startswith("<!-- loopbot:review=triage-17 -->") and "## How to answer" in body


def test_truncate_middle() -> None:
    assert truncate_middle("short", 100, "p") == "short"
    cut = truncate_middle("a" * 9 + "\n" + "a\n" * 500 + "b\n" * 499 + "b", 500, "elsewhere")
    assert len(cut) <= 500 and cut.startswith("a" * 9) and cut.endswith("b\nb") and "elsewhere" in cut
    assert all(line in ("", "a", "b", "a" * 9) or "elsewhere" in line for line in cut.split("\n"))  # whole lines


@pytest.mark.parametrize("pad", range(5))  # one of five alignments put "/yes" first on the old tail's line
def test_truncate_middle_cuts_on_line_ends_only(pad: int) -> None:
    text = "x" * 40 + "/yes " * 400 + "z" * pad  # one long line: the old tail started wherever the count fell
    cut = truncate_middle(text, 500, "elsewhere")
    assert len(cut) <= 500 and cut.startswith("x" * 40) and "elsewhere" in cut
    assert all(not line.startswith("/") for line in cut.split("\n"))


def test_escalation_has_its_own_marker_and_the_notice_on_top() -> None:
    body = render_escalation(make_post(), "Escalated: waited 8h")
    assert body.startswith("<!-- loopbot:escalation=triage-17 -->\n**Escalated: waited 8h**")
    assert "<!-- loopbot:review=" not in body


def test_a_command_line_in_an_outcome_is_defused_and_round_trips() -> None:
    outcomes = entries("Decided: REJECT - because\n/approve\n   /retry")
    body = render_review(make_post(status="decided"), outcomes)
    assert parse_comment(body) == []
    assert outcomes_in(body) == outcomes


def test_who_names_every_user_team_and_permission_and_how_many_must_agree() -> None:
    teams = make_post(reviewers={"github": ("alice", "octo/ops-team")}, approvals_required=2)
    assert "needs 2 approvals of: @alice, team @octo/ops-team" in render_review(teams)
    both = make_post(reviewers={"github": ("alice",)}, min_permission="write")
    assert "needs 1 approval of: @alice (with write permission on this repository)" in render_review(both)
    anyone = make_post(reviewers={}, restricted=True, min_permission="maintain")
    assert "needs 1 approval of: anyone with maintain permission on this repository" in render_review(anyone)


def test_what_is_asked_then_the_proposal_then_how_to_answer_then_the_details() -> None:
    post = make_post()
    post.request.context["reason"] = "apply the labels"
    post.request.state_summary.update(cost_used=0.0, tokens_used=0, execution_state="waiting_for_human",
                                      unrecovered_failures=[{"type": "TOOL_ERROR", "message": "boom"}])
    post.request.proposal = Proposal("Approve to apply 2 label changes to octo/ops",
                                     [Table(["issue", "labels"], [["#1", "P1"], ["#2", "bug"]], title="Changes")])
    body = render_review(post)
    order = ["<!-- loopbot:review=triage-17 -->", "## Approve to apply 2 label changes to octo/ops", "### Changes",
             "| #2 | bug |", "## How to answer", "**Who can answer:**", "`/approve [note]`", "`loopbot:approve`",
             "<details><summary>Details</summary>", "- **Asked because:** the loop asked for a decision",
             "- **Iteration:** 2", "- **Loop state:** waiting for a person", "| tool error | boom |",
             "| reason | apply the labels |", "</details>"]
    assert [body.index(part) for part in order] == sorted(body.index(part) for part in order)
    for engine_word in ("ON_EXTERNAL_REQUEST", "waiting_for_human", "TOOL_ERROR", "Cost", "Tokens", "Human Checkpoint"):
        assert engine_word not in body
    post.request.state_summary.update(cost_used=0.25, tokens_used=1200)
    spent = render_review(post)
    assert "- **Cost used:** 0.25" in spent and "- **Tokens used:** 1,200" in spent


def test_without_a_proposal_the_reason_is_what_is_asked() -> None:
    post = make_post()
    post.request.context["reason"] = "the nightly sync found 3 conflicts"
    body = render_review(post)
    assert "\n## the nightly sync found 3 conflicts\n" in body and "| reason |" not in body
    assert "- **Next step:** Apply 3 labels" in body


def test_a_decided_review_shows_the_outcome_and_no_waiting_state() -> None:
    post = make_post(status="decided")
    post.request.state_summary["execution_state"] = "waiting_for_human"
    body = render_review(post, entries("Decided: REJECT by github:bob - no"))
    assert "## How to answer" not in body and "Who can answer" not in body
    assert "waiting for a person" not in body and "paused for this review" not in body


def test_a_huge_escalation_notice_leaves_the_review_whole_below_it() -> None:
    body = render_escalation(make_post(), "Escalated: <!here> " * 5_000)
    assert len(body) <= MAX_COMMENT_CHARS and "…**" in body
    assert "`loopbot:pause`." in body and body.rstrip().endswith("</details>")
