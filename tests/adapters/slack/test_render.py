"""Block Kit rendering: readable mrkdwn, escaped loop text, Block Kit limits, buttons only while open."""

from __future__ import annotations

import json
import re
from typing import Any

from adapters.channel import Answer, AnswerKind
from adapters.inert import WORD_JOINER
from adapters.slack.mrkdwn import escape, is_outcome, outcome_line, render_answer, to_mrkdwn
from adapters.slack.limits import block_text
from adapters.slack.render import (
    ACTION_IDS,
    MAX_BLOCKS,
    MAX_HEADER,
    MAX_MESSAGE_TEXT,
    MAX_SECTION,
    render_escalation,
    render_review,
)
from tests.adapters.slack.conftest import make_post, make_request
from tests.fakes.slack_api import block_problem


def texts(blocks: list[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    for block in blocks:
        if "text" in block:
            found.append(block["text"]["text"])
        for element in block.get("elements", []):
            if isinstance(element.get("text"), str):
                found.append(element["text"])
    return found


def actions(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_open_review_shows_the_facts_who_may_answer_and_buttons() -> None:
    message = render_review(make_post())
    shown = "\n".join(texts(message.blocks))
    assert message.blocks[0] == {"type": "header", "text": {"type": "plain_text", "text": "Review triage-17: triage",
                                                            "emoji": True}}
    for fact in ("asked because a step failed", "*Continue with step apply: Apply labels*",
                 "step apply: Apply labels", "iteration 2", "plan 2/4 steps done",
                 "1 unrecovered failure", "tool error at step apply", "`triage-17`", "`triage-run-3`",
                 "<@U0AAA>, <@U0BBB> (2 of 2 must approve)", "`/loopbot approve triage-17`",
                 "`@loopbot approve` in this thread"):
        assert fact in shown, fact
    buttons = actions(message.blocks)
    assert [b["action_id"] for b in buttons] == list(ACTION_IDS.values())
    assert {b["value"] for b in buttons} == {"triage-17"}


def test_no_markdown_syntax_and_loop_text_is_escaped() -> None:
    post = make_post(request=make_request(
        proposed_action="Merge <@U0EVIL> & <!channel> now",
        context={"table": [{"a": 1, "b": "x|y"}], "note": "a > b"},
    ))
    message = render_review(post)
    shown = ("\n".join(texts(message.blocks)) + message.text).replace(WORD_JOINER, "")
    assert "**" not in shown
    assert not re.search(r"^\s*#", shown, re.MULTILINE)
    assert "|---" not in shown and "| " not in shown
    assert "&lt;@U0EVIL&gt; &amp; &lt;!channel&gt;" in shown
    assert "<!channel>" not in shown and "<@U0EVIL>" not in shown
    assert "a &gt; b" in shown


def test_loop_markdown_becomes_mrkdwn() -> None:
    assert to_mrkdwn("## Plan\n**bold** and [docs](https://x.test/a)") == "*Plan*\n*bold* and docs (<https://x.test/a>)"
    assert escape("a<b>&c") == "a&lt;b&gt;&amp;c"


def test_a_huge_request_fits_block_kit_limits() -> None:
    failures = [{"id": f"f{i}", "type": "TOOL_ERROR", "status": "OPEN", "step": "s", "message": "x" * 5000}
                for i in range(200)]
    post = make_post(
        loop="l" * 400,
        request=make_request(
            proposed_action="p" * 10_000,
            state_summary={f"key_{i}": "v" * 2000 for i in range(300)} | {"unrecovered_failures": failures},
            context={f"c{i}": "y" * 4000 for i in range(300)},
        ),
    )
    message = render_review(post)
    assert block_problem(message.blocks) is None
    assert len(message.blocks) <= MAX_BLOCKS
    assert len(message.blocks[0]["text"]["text"]) <= MAX_HEADER
    assert all(len(t) <= MAX_SECTION for t in texts(message.blocks))
    assert block_text(message.blocks) <= MAX_MESSAGE_TEXT
    assert len(message.text) <= MAX_SECTION
    assert actions(message.blocks), "the buttons survive the cut"
    dumped = json.dumps(message.blocks, ensure_ascii=False)
    assert re.search(r"200 unrecovered failures, the latest \d here", dumped)
    assert re.search(r"…and 5\d\d more", dumped)
    escalated = render_escalation(post, "Escalated: nobody answered for 8h")
    assert block_problem(escalated.blocks) is None


def test_decided_review_has_no_buttons_and_says_who_decided() -> None:
    post = make_post(status="decided")
    outcome = "Decided: APPROVE by slack:U0AAA, slack:U0BBB at 2026-11-29T09:00:00+00:00 - ship <it>"
    message = render_review(post, outcome)
    assert not actions(message.blocks)
    shown = "\n".join(texts(message.blocks))
    assert "*Approved by <@U0AAA>, <@U0BBB>: ship &lt;it&gt;*" in shown
    assert "Who can answer" not in shown


def test_outcome_lines() -> None:
    assert outcome_line("Timed out: REJECT (default) at 2026-11-29T09:00:00+00:00. no answer") == (
        "Timed out → rejected: no answer")
    assert outcome_line("Decided: REJECT by local:alice at 2026-11-29T09:00:00+00:00 - too risky") == (
        "Rejected by local:alice: too risky")
    # only the voters of an outcome line become mentions; the shorthand in any other text stays inert
    assert outcome_line("Reminder: waiting for slack:U0AAA") == "Reminder: waiting for slack:U0AAA"
    assert is_outcome("Decided: APPROVE by x at t") and not is_outcome("run triage-run-3 completed")


def test_who_may_answer_without_slack_ids() -> None:
    hinted = "\n".join(texts(render_review(make_post(reviewers={}, reviewers_hint="alice, bob",
                                                     approvals_required=1)).blocks))
    assert "*Who can answer:* alice, bob (1 approval needed)" in hinted
    anyone = "\n".join(texts(render_review(make_post(reviewers={}, approvals_required=1)).blocks))
    assert "anyone in this channel (1 approval needed)" in anyone


def test_answers_are_escaped_and_keep_columns() -> None:
    assert render_answer(Answer(AnswerKind.COUNTED, "counted <1 of 2>")) == "counted &lt;1 of 2&gt;"
    assert render_answer(Answer(AnswerKind.INFO, "Commands:\n  approve   x")) == "Commands:\n```  approve   x```"
    status = "1 open review(s) you may answer:\n- triage-17 (loop triage): `approve triage-17`"
    assert render_answer(Answer(AnswerKind.INFO, status)) == status


def test_answers_keep_the_mentions_loopbot_writes_but_nothing_else() -> None:
    refused = ("vote refused: <@U0CCC> is not one of this loop's Slack reviewers (review.reviewers.slack_users / "
               "slack_groups); who may answer: <@U0AAA>, <!subteam^S0OPS>")
    assert render_answer(Answer(AnswerKind.REFUSED, refused)) == refused
    with_people = refused + "; people who may answer: alice, bob"
    assert render_answer(Answer(AnswerKind.REFUSED, with_people)) == with_people
    assert render_answer(Answer(AnswerKind.INFO, "<!channel> <@here> <#C0AAA>")) == (
        "&lt;!channel&gt; &lt;@here&gt; &lt;#C0AAA&gt;")


def test_voter_text_echoed_in_an_answer_pings_nobody() -> None:
    """A modify's changes and a mistyped command come back in the answer: their mentions stay text."""
    tally = ('modify from slack:U0AAA recorded: 1 of 2 needed for these changes: {"context.note": "<@U0BOSS>"}; '
             'slack:U0BBB proposed different changes: {"context.x": "<!subteam^S0ALL> <@U0CEO>"}')
    shown = render_answer(Answer(AnswerKind.COUNTED, tally))
    assert "<@" not in shown and "<!" not in shown
    assert "&lt;@U0BOSS&gt;" in shown and "&lt;!subteam^S0ALL&gt; &lt;@U0CEO&gt;" in shown
    forged = '"<@U0BOSS> is not one of this loop\'s Slack reviewers; who may answer: <@U0CEO>" is not a command'
    assert "<@" not in render_answer(Answer(AnswerKind.INVALID, forged))
