"""Every comment loopbot makes on GitHub, fuzzed with hostile and huge loop and voter text (#18, items 3 and 5).

Beside ``test_inert_text``: the same hostile text, now in a structured
proposal (summary, text, a table, a list) of up to hundreds of kilobytes and
in outcomes and updates; every part of every renderer stays within GitHub's
65,536 characters, holds no line that reads as a command, and stays inert,
and nothing of the proposal is lost across the parts.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.channel import PostOutcome
from adapters.github import render as github
from adapters.inert import WORD_JOINER
from loop_engine.proposal import ChangeList, Proposal, Table, Text

from .test_inert_text import WHEN, assert_inert_on_github, hostile, post_with

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _line(text: str) -> str:
    return " ".join(text.split()) or "x"


def proposal_of(text: str, rows: int) -> Proposal:
    table = Table(["issue", "title", "labels"], [[f"#{n}", text[:300], "add P1"] for n in range(rows)], title="Changes")
    return Proposal(_line(text)[:2_000], [Text(text if text.strip() else "x"), table,
                                          ChangeList([_line(text)[:500]] * 3)])


@FUZZ
@given(loop_text=hostile, voter_text=hostile, rows=st.integers(min_value=0, max_value=3_000))
def test_every_github_comment_fits_holds_no_command_and_stays_inert(loop_text: str, voter_text: str,
                                                                   rows: int) -> None:
    post = dataclasses.replace(post_with(loop_text), reviewers={"github": ("alice", "octo/ops-team")})
    post.request.proposal = proposal_of(loop_text, rows)
    parts = github.review_parts(post)
    bodies = [github.render_review(post), github.render_escalation(post, f"Escalated: {voter_text}")]
    bodies += [github.render_more(post, parts, n) for n in range(2, len(parts) + 1)]
    reason = f"not before APPROVE {voter_text}"
    decided = dataclasses.replace(post, status="decided", outcome=PostOutcome("reject", ("github:bob",), reason))
    outcome = f"Decided: REJECT by github:bob at {WHEN} - {reason}"
    bodies.append(github.render_review(decided, [(github.outcome_key(outcome), outcome)]))
    marker = github.answer_marker("update:demo-1:abc")
    for text in (outcome, f"Run demo-run-1 completed. Result: {loop_text * 20}"):
        bodies += github.update_parts(decided, marker, text)
    for body in bodies:
        assert len(body) <= 65_536
        assert_inert_on_github(body.replace("team @octo/ops-team", "").replace("@alice", ""))


def test_a_5000_row_table_is_split_whole_with_its_header_on_every_part() -> None:
    post = post_with("triage")
    post.request.proposal = Proposal("Approve to apply 5,000 label changes to octo/ops",
                                     [Table(["issue", "title", "labels"],
                                            [[f"#{n}", f"Crash on start, case {n}", "add P1"] for n in range(5_000)])])
    parts = github.review_parts(post)
    assert len(parts) >= 3
    bodies = [github.render_review(post)] + [github.render_more(post, parts, n) for n in range(2, len(parts) + 1)]
    assert all(len(body) <= 65_536 for body in bodies)
    rows = [line for body in bodies for line in body.split("\n") if line.startswith("| #")]
    assert rows == [f"| #{n} | Crash on start, case {n} | add P1 |" for n in range(5_000)]
    for n, body in enumerate(bodies[1:], 2):
        assert body.startswith(f"<!-- loopbot:more=demo-1.review.{n} -->\n")
        assert f"part {n} of {len(parts)}" in body and "| issue | title | labels |\n|---|---|---|" in body
    assert "Continued in the next comment** (part 2 of" in bodies[0]
    assert all("Continued in the next comment" in body for body in bodies[:-1])
    assert "Continued in the next comment" not in bodies[-1]


def test_a_fenced_block_split_across_comments_is_closed_and_reopened() -> None:
    parts = github.split_markdown("intro\n```\n" + "code line\n" * 3_000 + "```\nafter", 10_000, 10_000)
    assert len(parts) >= 3
    for part in parts:
        fences = [line for line in part.split("\n") if line.startswith("```")]
        assert len(fences) % 2 == 0
    assert sum(part.count("code line") for part in parts) == 3_000


def test_one_huge_line_is_split_and_kept_whole() -> None:
    text = "a&amp;b " * 20_000
    parts = github.split_markdown(text, 30_000, 30_000)
    assert all(len(part) <= 30_000 for part in parts) and "".join(parts).replace("\n", "") == text
    assert all(not part.endswith(("&", "&a", "&am", "&amp")) for part in parts)


def test_a_long_update_goes_on_in_numbered_parts() -> None:
    post = post_with("x")
    marker = github.answer_marker("update:demo-1:abc")
    text = "Votes, as cast:\n" + "\n".join(f"- {WHEN} github:bob reject - {'why ' * 40}{n}" for n in range(1_000))
    bodies = github.update_parts(post, marker, text, "https://github.com/octo/ops/issues/42#issuecomment-1")
    assert len(bodies) >= 3 and all(len(body) <= 65_536 for body in bodies)
    assert bodies[0].startswith(marker) and bodies[1].startswith("<!-- loopbot:answer=update:demo-1:abc:2 -->")
    assert f"(part 2 of {len(bodies)})" in bodies[1]
    joined = "\n".join(bodies).replace(WORD_JOINER, "")
    assert all(f"why {n}" in joined for n in (0, 500, 999))
