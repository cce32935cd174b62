"""Every Slack message fits Slack's limits and says everything: the proposal whole, the outcome whole, in order.

A hypothesis fuzz drives every renderer (review, escalation, outcome,
reminder, run end) with hostile loop and voter text and big proposals and
checks each message - and each further reply it carries - against the
fake Slack's validator (the limits and slack_sdk's Block Kit models) and
loopbot's own tighter total; the rest pins what a reader sees.
"""

from __future__ import annotations

import csv
import io
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.slack.limits import MAX_BLOCKS, MAX_HEADER, MAX_MESSAGE_TEXT, MAX_TEXT, block_text
from adapters.slack.render import (
    RenderedMessage,
    render_escalation,
    render_review,
    render_run_parent,
    render_update,
)
from loop_engine.checkpoint import CheckpointTrigger
from loop_engine.proposal import ChangeList, Link, Proposal, Table, Text
from tests.adapters.slack.conftest import make_post, make_request
from tests.adapters.test_inert_text import WHEN, assert_inert_on_slack, hostile, post_with
from tests.fakes.slack_api import block_problem

ROWS_5000 = [[f"#{n}", f"Crash <@U0EVIL> on start {n}", "add P1"] for n in range(5000)]


def all_texts(message: RenderedMessage) -> list[str]:
    found: list[str] = []
    for block in message.blocks:
        if isinstance(block.get("text"), dict):
            found.append(block["text"]["text"])
        found += [e["text"] for e in block.get("elements", []) if isinstance(e.get("text"), str)]
    return found


def assert_fits(message: RenderedMessage) -> None:
    """This message and every reply it carries are what Slack accepts, with loopbot's room to spare."""
    for part in (message, *message.more):
        assert block_problem(part.blocks) is None, block_problem(part.blocks)
        assert len(part.blocks) <= MAX_BLOCKS
        assert block_text(part.blocks) <= MAX_MESSAGE_TEXT
        assert all(len(text) <= MAX_TEXT for text in all_texts(part))
        headers = [b["text"]["text"] for b in part.blocks if b["type"] == "header"]
        assert all(len(h) <= MAX_HEADER for h in headers)
        assert part.text and len(part.text) <= MAX_TEXT
        assert not part.more or part is message


def every_text(message: RenderedMessage) -> str:
    return "\n".join(t for part in (message, *message.more) for t in all_texts(part))


def proposal_of(text: str, rows: int) -> Proposal:
    return Proposal(
        summary=" ".join(text.split())[:500] or "Approve to apply the changes",
        sections=[Text(text if text.strip() else "x", title=" ".join(text.split())[:200]),
                  # the first rows whole (cells past a text object's limit), the rest short enough that thousands of
                  # rows are many blocks and messages, not hundreds of megabytes
                  Table(["issue", "title"], [[f"#{n}", text if n < 3 else text[:300]] for n in range(rows)],
                        title="Changes"),
                  ChangeList([" ".join(text.split()) or "-"] * 3), Link("https://x.test/a|b", " ".join(text.split()))],
    )


# --- the fuzz -----------------------------------------------------------------------------------------------
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(loop_text=hostile, voter_text=hostile, rows=st.integers(min_value=0, max_value=2000))
def test_every_slack_renderer_fits_slacks_limits(loop_text: str, voter_text: str, rows: int) -> None:
    reviewers = {"slack": ("U0AAA", "U0BBB")}
    named = {"U0AAA", "U0BBB"}
    plain = post_with(loop_text, reviewers=reviewers)
    proposed = make_post(request=make_request(proposal=proposal_of(loop_text, rows), context={"note": loop_text}),
                         loop=loop_text[:300] or "demo", reviewers=reviewers)
    for post in (plain, proposed):
        for message in (render_review(post), render_escalation(post, f"Escalated: {voter_text}")):
            assert_fits(message)
            for part in (message, *message.more):
                assert_inert_on_slack(part, named)
        decided = make_post(request=post.request, status="decided", reviewers=reviewers)
        outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - {voter_text or 'no'}"
        assert_fits(render_review(decided, outcome))
        assert_inert_on_slack(render_review(decided, outcome), {"U0AAA"})
    for text in (f"Decided: REJECT by slack:U0AAA at {WHEN} - {voter_text}", f"Reminder: {voter_text}",
                 f"Run demo-run-1 completed. Result: {loop_text}",
                 f"Timed out: REJECT (default) at {WHEN}. {voter_text}",
                 f"Votes, as cast:\n- {WHEN} slack:U0AAA reject - {voter_text} (via slack)"):
        update = render_update(text)
        assert_fits(update)
        for part in (update, *update.more):
            assert_inert_on_slack(part, {"U0AAA"} if text.startswith("Decided") else set())
    parent = render_run_parent(loop_text[:300] or "demo", "demo-run-1")
    assert_fits(parent)
    assert_inert_on_slack(parent, set())


# --- the order, and words for people ------------------------------------------------------------------------
def test_a_review_reads_what_is_asked_the_proposal_who_may_answer_then_the_diagnostics() -> None:
    proposal = Proposal("Approve to apply 2 label changes to octo/ops", [
        Table(["issue", "labels"], [["#12", "add P1"], ["#15", "add bug"]], title="Changes"),
    ])
    summary = {"iteration": 3, "status": "PAUSED", "execution_state": "waiting_for_human", "failures": 0,
               "cost_used": 0.0, "tokens_used": 0, "unrecovered_failures": []}
    post = make_post(request=make_request(trigger=CheckpointTrigger.ON_EXTERNAL_REQUEST, proposal=proposal,
                                          state_summary=summary, proposed_action="Continue with step recheck"))
    blocks = render_review(post).blocks
    kinds = [b["type"] for b in blocks]
    assert kinds == ["header", "section", "section", "section", "actions", "context"]
    assert blocks[1]["text"]["text"] == "*Approve to apply 2 label changes to octo/ops*"
    assert "#12    add P1\n#15    add bug" in blocks[2]["text"]["text"]
    assert blocks[3]["text"]["text"].startswith("*Who can answer:* <@U0AAA>, <@U0BBB> (2 of 2 must approve)")
    shown = every_text(render_review(post))
    assert "asked because the loop asked for a decision" in shown and "loop waiting for a person" in shown
    assert "next: Continue with step recheck" in shown
    for enum_or_zero in ("ON_EXTERNAL_REQUEST", "WAITING_FOR_HUMAN", "waiting_for_human", "PAUSED", "Cost",
                         "cost", "tokens", "local-reviews", "state directory"):
        assert enum_or_zero not in shown, enum_or_zero


def test_cost_and_tokens_show_only_when_a_loop_spent_some() -> None:
    spent = make_request(state_summary={"iteration": 1, "cost_used": 1.25, "tokens_used": 12_000})
    assert "cost 1.25 · 12,000 tokens" in every_text(render_review(make_post(request=spent)))


def test_without_a_proposal_the_loops_reason_is_asked() -> None:
    request = make_request(trigger=CheckpointTrigger.ON_EXTERNAL_REQUEST, context={"reason": "Label 3 issues?"},
                           proposed_action="Escalate to human")
    blocks = render_review(make_post(request=request)).blocks
    assert blocks[1]["text"]["text"] == "*Label 3 issues?*"
    assert "next: Escalate to human" in every_text(render_review(make_post(request=request)))


def test_who_may_answer_names_every_user_and_user_group() -> None:
    post = make_post(reviewers={"slack": ("U0AAA", "S0OPS")}, approvals_required=1)
    shown = every_text(render_review(post))
    assert "*Who can answer:* members of <!subteam^S0OPS>, <@U0AAA> (1 approval needed)" in shown


def test_a_decided_review_shows_no_stale_waiting_state() -> None:
    summary = {"iteration": 3, "status": "PAUSED", "execution_state": "waiting_for_human"}
    post = make_post(request=make_request(state_summary=summary), status="applied")
    message = render_review(post, f"Decided: APPROVE by slack:U0AAA at {WHEN} - go")
    shown = every_text(message)
    assert message.blocks[0]["text"]["text"] == "Review triage-17: triage (applied)"
    assert message.blocks[1]["text"]["text"] == "*Approved by <@U0AAA>: go*"
    for stale in ("waiting", "paused", "PAUSED", "Who can answer", "Press a button"):
        assert stale not in shown, stale


def test_a_table_of_long_or_marked_up_cells_is_one_bulleted_row_per_line() -> None:
    table = Table(["issue", "title"], [["#1", "a `code` title " * 8], ["#2", ""]])
    shown = every_text(render_review(make_post(request=make_request(proposal=Proposal("Approve", [table])))))
    assert "_issue · title_" in shown
    assert "• #1 · a `code` title a `code`" in shown and "• #2 · –" in shown


def test_a_link_shows_its_real_target_whole() -> None:
    proposal = Proposal("Approve", [Link("https://x.test/a|b", "the runbook")])
    assert "the runbook (<https://x.test/a%7Cb>)" in every_text(render_review(make_post(
        request=make_request(proposal=proposal))))


# --- whole, never silently cut ---------------------------------------------------------------------------------
def test_a_proposal_a_little_too_long_goes_on_in_thread_replies_with_every_row() -> None:
    rows = [[f"#{n}", f"Issue {n} needs a label"] for n in range(400)]
    message = render_review(make_post(request=make_request(proposal=Proposal("Approve", [Table(["n", "t"], rows)]))))
    assert_fits(message)
    assert len(message.more) >= 1 and not message.files
    assert f"goes on in the next {len(message.more)} repl" in every_text(message)
    shown = every_text(message)
    assert all(re.search(rf"#{n}\s+Issue {n} needs a label", shown) for n in range(400))
    labels = [part.blocks[0]["elements"][0]["text"] for part in message.more]
    assert labels[-1].endswith(f"part {len(message.more)} of {len(message.more)}")


def test_a_5000_row_proposal_is_uploaded_whole_as_markdown_and_csv() -> None:
    proposal = Proposal("Approve to apply 5,000 label changes", [Table(["issue", "title", "labels"], ROWS_5000,
                                                                       title="Changes")])
    message = render_review(make_post(request=make_request(proposal=proposal)))
    assert_fits(message)
    assert not message.more
    names = [f.filename for f in message.files]
    assert names == ["triage-17-proposal.md", "triage-17-Changes.csv"]
    assert "(5,000 table rows in all)" in every_text(message) and "`triage-17-Changes.csv`" in every_text(message)
    table = list(csv.reader(io.StringIO(message.files[1].content)))
    assert table == [["issue", "title", "labels"], *ROWS_5000]
    markdown = message.files[0].content
    assert all(f"| #{n} | Crash" in markdown for n in range(5000))


def test_a_long_reason_is_cut_in_the_review_and_whole_in_the_thread_replies() -> None:
    reason = "<" * 1000 + " because " + "why " * 700  # escaped (&lt;), 745 "<" fill the outcome's section
    outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - {reason}"
    review = render_review(make_post(status="decided"), outcome)
    assert_fits(review)
    shown = review.blocks[1]["text"]["text"]
    assert shown.startswith("Rejected by <@U0AAA>: &lt;") and "…" in shown and "in this thread" in shown
    update = render_update(outcome)
    assert_fits(update)
    whole = "".join(t for part in (update, *update.more) for t in all_texts(part) if "part" not in t)
    assert re.sub(r"\s", "", whole) == re.sub(r"\s", "", "Rejected by <@U0AAA>: " + reason.replace("<", "&lt;"))


def test_a_very_long_reason_takes_several_replies() -> None:
    update = render_update(f"Decided: REJECT by slack:U0AAA at {WHEN} - " + "no " * 20_000)
    assert_fits(update)
    assert len(update.more) >= 5
    assert sum(t.count("no") for part in (update, *update.more) for t in all_texts(part)) == 20_000


def test_run_end_shows_the_loops_summary() -> None:
    text = "Run triage-run-3 completed. Result: 1 iteration(s); Triaged 7 issues: 3 labelled, 4 skipped"
    assert all_texts(render_update(text)) == [text]


def test_a_long_list_of_reviewers_is_bounded_and_mentions_stay_whole() -> None:
    users = tuple(f"U{n:08d}" for n in range(500))
    message = render_review(make_post(reviewers={"slack": (*users, "S0OPS")}, approvals_required=3))
    assert_fits(message)
    [who] = [t for t in all_texts(message) if t.startswith("*Who can answer:*")]
    assert "members of <!subteam^S0OPS>, <@U00000000>" in who and re.search(r"and \d+ more \(3 approvals needed\)", who)
    assert who.count("<") == len(re.findall(r"<@U\d{8}>", who)) + who.count("<!subteam^S0OPS>")  # none cut


def test_a_long_question_is_cut_on_top_and_shown_whole_after_it() -> None:
    reason = "Should I " + "label this " * 400 + "now?"
    message = render_review(make_post(request=make_request(context={"reason": reason})))
    assert_fits(message)
    assert message.blocks[1]["text"]["text"].endswith("…*")
    assert reason.split() == every_text(message).split("The whole question: ", 1)[1].split()[: len(reason.split())]
