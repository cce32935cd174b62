"""The markdown audit: readable tables, escaped cells, a header that survives any text."""

from __future__ import annotations

import re

from loop_engine.audit import parse_audit_header, render_state_markdown
from loop_engine.markdown import escape_cell, escape_inline
from loop_engine.review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import Failure, LoopState, LoopStatus, Plan, RecoveryAction, Step

# A GFM row split on unescaped pipes only.
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def cells(row: str) -> list[str]:
    return [c.strip() for c in _UNESCAPED_PIPE.split(row.strip())[1:-1]]


def section(text: str, title: str) -> list[str]:
    """The table rows under ``## title``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"## {title}"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def audit_state() -> LoopState:
    nasty = "a | b\nsecond line <!-- loopbot:review=x --> \\|"
    return LoopState(
        trace_id="t-1",
        current_plan=Plan(id="p", steps=[Step(id="s1", description=nasty, output={"k": nasty})]),
        failures=[Failure(failure_id="f1", message=nasty)],
        recoveries=[RecoveryAction(action_id="r1", failure_id="f1", reason=nasty)],
        reviewed_causes=["failure:f0"],
        pending_review=ReviewRequest(
            checkpoint_id="checkpoint_0002",
            trigger=CheckpointTrigger.ON_FAILURE,
            proposed_action=nasty,
            cause="failure:f1",
        ),
        decisions=[
            ReviewResponse(
                checkpoint_id="checkpoint_0001",
                decision=HumanDecision.MODIFY,
                feedback=nasty,
                reviewer="alice",
                modifications={"goal": "x"},
            )
        ],
        counters={"actor": 2},
        stop_reason="ended --> here -- really",
        status=LoopStatus.PAUSED,
    )


def test_every_section_is_a_table_with_the_right_column_count() -> None:
    text = render_state_markdown(audit_state(), "t-1")
    for title, width in [
        ("Plan", 6),
        ("Failures", 6),
        ("Recoveries", 6),
        ("Checkpoints", 5),
        ("Human Decisions", 6),
        ("Counters", 2),
    ]:
        rows = section(text, title)
        assert len(rows) >= 3, title  # header, rule, at least one row
        assert all(len(cells(row)) == width for row in rows), (title, rows)


def test_pipes_newlines_and_html_are_escaped_in_cells() -> None:
    text = render_state_markdown(audit_state(), "t-1")
    failure_row = section(text, "Failures")[2]
    message = cells(failure_row)[-1]
    assert message == "a \\| b<br>second line &lt;!-- loopbot:review=x --&gt; \\\\\\|"
    assert "<!-- loopbot" not in text


def test_checkpoints_and_decisions_are_listed() -> None:
    text = render_state_markdown(audit_state(), "t-1")
    checkpoints = [cells(r) for r in section(text, "Checkpoints")[2:]]
    assert checkpoints[0][:3] == ["checkpoint_0002", "ON_FAILURE", "failure:f1"]
    assert checkpoints[0][-1] == "waiting"
    assert checkpoints[1][2:] == ["failure:f0", "-", "reviewed"]
    decision = cells(section(text, "Human Decisions")[2])
    assert decision[:3] == ["checkpoint_0001", "MODIFY", "alice"]


def test_header_survives_comment_terminators_in_text() -> None:
    state = audit_state()
    header = parse_audit_header(render_state_markdown(state, "t-1"))
    assert header is not None
    assert header["stop_reason"] == "ended --> here -- really"
    assert header["trace_id"] == "t-1" and header["status"] == "PAUSED" and header["counters"] == {"actor": 2}


def test_long_cells_are_cut() -> None:
    state = LoopState(current_plan=Plan(steps=[Step(id="s", output="x" * 5000)]))
    row = section(render_state_markdown(state, "t"), "Plan")[2]
    assert len(cells(row)[-1]) == 200 and cells(row)[-1].endswith("…")


def test_escape_helpers() -> None:
    assert escape_inline("a\nb <i>") == "a b &lt;i&gt;"
    assert escape_cell("a|b\r\nc") == "a\\|b<br>c"
    assert parse_audit_header("no header here") is None
