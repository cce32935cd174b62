"""The markdown audit of a loop state.

The audit is for people: plan, failures, recoveries, checkpoints and human
decisions as tables. It is not a storage format. The one machine-readable
part is a hidden header comment (``<!-- loop_engine:header {...} -->``)
holding the fields ``parse_audit_header`` gives back - see
``HEADER_FIELDS``; everything else is restored only from JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .jsonvalue import iso_datetime
from .markdown import escape_inline, render_table
from .types import LoopState

__all__ = ["HEADER_FIELDS", "render_state_markdown", "parse_audit_header"]

#: The LoopState fields a markdown audit restores; nothing else survives it.
HEADER_FIELDS = (
    "trace_id",
    "status",
    "execution_state",
    "current_iteration",
    "counters",
    "stop_reason",
    "checkpoint_counter",
    "started_at",
    "updated_at",
)

_HEADER_RE = re.compile(r"^<!-- loop_engine:header (\{.*\}) -->$", re.MULTILINE)
_CELL_LIMIT = 200


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    return [*render_table(headers, rows, _CELL_LIMIT), ""]


def _header(state: LoopState) -> dict[str, Any]:
    return {
        "trace_id": state.trace_id,
        "status": state.status.name,
        "execution_state": state.execution_state.name,
        "current_iteration": state.current_iteration,
        "counters": dict(state.counters),
        "stop_reason": state.stop_reason,
        "checkpoint_counter": state.checkpoint_counter,
        "started_at": None if state.started_at is None else iso_datetime(state.started_at),
        "updated_at": None if state.updated_at is None else iso_datetime(state.updated_at),
    }


def render_state_markdown(state: LoopState, trace_id: str) -> str:
    """The audit document for one state (what ``format="markdown"`` writes).

    ``trace_id`` names the file's run in the title; the header keeps the
    state's own ``trace_id`` field, as JSON does.
    """
    # "--" may not appear inside an HTML comment; "\u002d" is the same "-" to JSON.
    header = json.dumps(_header(state), default=repr).replace("--", "-\\u002d")
    lines = [
        f"<!-- loop_engine:header {header} -->",
        f"# Loop State: {escape_inline(trace_id)}",
        "",
        f"- **Status:** {state.status.name}",
        f"- **Execution State:** {state.execution_state.value}",
        f"- **Iteration:** {state.current_iteration}",
        f"- **Goal:** {escape_inline(state.context.goal) if state.context else '-'}",
        f"- **Stop Reason:** {escape_inline(state.stop_reason or '-')}",
        f"- **Checkpoints Presented:** {state.checkpoint_counter}",
        "",
    ]
    plan = state.current_plan
    if plan is not None:
        done = sum(1 for s in plan.steps if s.is_completed())
        lines += [f"## Plan `{escape_inline(plan.id)}` v{plan.version} ({done}/{len(plan.steps)} steps done)", ""]
        lines += _table(
            ["Step", "Description", "Status", "Depends On", "Attempts", "Output"],
            [
                [s.id, s.description, s.status.value, ", ".join(s.dependencies), s.attempts, s.output]
                for s in plan.steps
            ],
        )
    if state.failures:
        lines += ["## Failures", ""]
        lines += _table(
            ["ID", "Type", "Status", "Step", "Attempts", "Message"],
            [
                [
                    f.failure_id,
                    f.type.value,
                    f.status.value,
                    f.step_id,
                    f"{f.recovery_attempts}/{f.max_recovery_attempts}",
                    f.message,
                ]
                for f in state.failures
            ],
        )
    if state.recoveries:
        lines += ["## Recoveries", ""]
        lines += _table(
            ["ID", "Strategy", "Failure", "Executed", "Success", "Reason"],
            [[r.action_id, r.strategy.value, r.failure_id, r.executed, r.success, r.reason] for r in state.recoveries],
        )
    review = state.pending_review
    if review is not None or state.reviewed_causes:
        lines += ["## Checkpoints", ""]
        rows = []
        if review is not None:
            rows.append([review.checkpoint_id, review.trigger.name, review.cause, review.proposed_action, "waiting"])
        rows += [
            ["-", "-", cause, "-", "reviewed"]
            for cause in state.reviewed_causes
            if review is None or cause != review.cause
        ]
        lines += _table(["Checkpoint", "Trigger", "Cause", "Proposed Action", "State"], rows)
    if state.decisions:
        lines += ["## Human Decisions", ""]
        lines += _table(
            ["Checkpoint", "Decision", "Reviewer", "Time", "Feedback", "Modifications"],
            [
                [d.checkpoint_id, d.decision.name, d.reviewer, d.timestamp, d.feedback, d.modifications or None]
                for d in state.decisions
            ],
        )
    if state.counters:
        lines += ["## Counters", ""]
        lines += _table(["Counter", "Value"], [[k, v] for k, v in state.counters.items()])
    return "\n".join(lines)


def parse_audit_header(text: str) -> dict[str, Any] | None:
    """The header fields of an audit document, or None when it has no header."""
    match = _HEADER_RE.search(text)
    if match is None:
        return None
    header = json.loads(match.group(1))
    if not isinstance(header, dict):
        raise ValueError("the loop_engine header is not a JSON object")
    return header
