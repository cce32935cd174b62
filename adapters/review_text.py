"""What a review says, in the order a person reads it, as markdown parts every markdown channel lays out.

The person deciding needs first what approving does (``asked``: the
proposal's summary, else the loop's reason), then the proposal itself, then
how to answer on their channel (each channel words that), and last - for
whoever wants to know why the loop stopped - the diagnostics: trigger,
iteration, state, failures, context. ``ReviewRequest.to_markdown()`` keeps
the engine's own order (the tutorial's); the GitHub comment and the local
review file are built from these parts instead.

Loop text is escaped here (``escape_inline``, ``render_table``) exactly as
``to_markdown`` escapes it; a channel adds its own inert pass (GitHub's
``github_markdown``). Enum names are shown as words, and cost and tokens only
when a loop spent some.
"""

from __future__ import annotations

import re
from typing import Any

from loop_engine.markdown import escape_inline, render_table, show_value
from loop_engine.review import ReviewRequest, with_zone

__all__ = ["asked", "asked_because", "diagnostics_lines", "proposal_lines", "reason_is_asked", "words"]

_TRIGGERS = {
    "ON_FAILURE": "a step failed",
    "ON_MAJOR_FAILURE": "a major failure",
    "ON_PLAN_COMPLETE": "the plan is complete",
    "ON_ITERATION_BOUNDARY": "an iteration ended",
    "ON_COST_THRESHOLD": "the cost limit was reached",
    "ON_EXTERNAL_REQUEST": "the loop asked for a decision",
}
_WORDS = {"waiting_for_human": "waiting for a person", "paused": "paused for this review"}
_ENUM = re.compile(r"\A[A-Za-z]+(?:_[A-Za-z]+)*\Z")
#: state_summary keys shown in lines of their own (the rest follow under their own names).
_OWN = ("iteration", "plan_progress", "current_step", "status", "execution_state", "failures",
        "cost_used", "tokens_used")
#: The loop's state while it waited: no longer true once the review is decided.
_WHILE_OPEN = ("status", "execution_state")


def asked_because(trigger: str) -> str:
    """Why the loop asked, in words: ``ON_FAILURE`` -> "a step failed"."""
    return _TRIGGERS.get(trigger, words(trigger))


def words(value: str) -> str:
    """An enum name as words: ``WAITING_FOR_HUMAN`` -> "waiting for a person", ``TOOL_ERROR`` -> "tool error"."""
    if not _ENUM.match(value):
        return value
    key = value.lower()
    return _WORDS.get(key, key.replace("_", " "))


def _reason(request: ReviewRequest) -> str:
    reason = request.context.get("reason")
    return " ".join(reason.split()) if isinstance(reason, str) else ""


def reason_is_asked(request: ReviewRequest) -> bool:
    """Is the loop's reason what the review asks (no proposal), so the details need not repeat it?"""
    return request.proposal is None and bool(_reason(request))


def asked(request: ReviewRequest) -> str:
    """What the person is asked, on one unescaped line: the proposal's summary, the reason, the failure, the step."""
    if request.proposal is not None:
        return request.proposal.summary
    if reason := _reason(request):
        return reason
    failure = request.context.get("failure_message")
    if isinstance(failure, str) and failure.strip():
        return "A step failed: " + " ".join(failure.split())
    return " ".join(request.proposed_action.split()) or "The loop asks for a decision"


def proposal_lines(request: ReviewRequest) -> list[str]:
    """The proposal's sections as escaped markdown lines (none without a proposal): all of them, never cut."""
    if request.proposal is None:
        return []
    return request.proposal.section_lines()[1:]  # section_lines starts with the blank line before each section


def _spent(summary: dict[str, Any]) -> list[str]:
    lines = []
    for key, label in (("cost_used", "Cost used"), ("tokens_used", "Tokens used")):
        value = summary.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value:
            lines.append(f"- **{label}:** {value:,}" if isinstance(value, int) else f"- **{label}:** {value:g}")
    return lines


def _line(label: str, value: Any) -> str:
    shown = words(value) if isinstance(value, str) else show_value(value)
    return f"- **{escape_inline(label)}:** {escape_inline(shown)}"


def _title(key: str) -> str:
    return key.replace("_", " ").strip().capitalize() or "-"


def diagnostics_lines(request: ReviewRequest, *, is_open: bool = True) -> list[str]:
    """Why the loop asked and what state it was in, as escaped markdown lines (tables for lists of records)."""
    summary = request.state_summary
    lines = [f"- **Asked because:** {asked_because(request.trigger.name)}",
             f"- **Asked at:** {with_zone(request.timestamp, 'seconds')}"]
    if request.proposed_action and asked(request) != " ".join(request.proposed_action.split()):
        lines.append(_line("Next step", request.proposed_action))
    for key, label in (("iteration", "Iteration"), ("plan_progress", "Plan"), ("current_step", "Step")):
        if summary.get(key) is not None:
            lines.append(_line(label, summary[key]))
    if is_open:
        state = summary.get("execution_state") or summary.get("status")
        if isinstance(state, str) and state:
            lines.append(_line("Loop state", state))
    if "failures" in summary:
        lines.append(_line("Failures", summary["failures"] or "none"))
    lines += _spent(summary)
    tables: list[tuple[str, list[dict[str, Any]]]] = []
    for key, value in summary.items():
        if key in _OWN or (not is_open and key in _WHILE_OPEN):
            continue
        if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
            tables.append((key, value))
        elif value != []:
            lines.append(_line(_title(key), value))
    for key, rows in tables:
        columns: list[str] = []
        for row in rows:
            columns += [k for k in row if k not in columns]
        cells = [[words(v) if isinstance(v, str) else v for v in (row.get(c) for c in columns)] for row in rows]
        lines += ["", f"**{escape_inline(_title(key))}**", "", *render_table([_title(c) for c in columns], cells)]
    context = [[k, v] for k, v in request.context.items() if not (k == "reason" and reason_is_asked(request))]
    if context:
        lines += ["", "**Context**", "", *render_table(["Key", "Value"], context)]
    return lines
