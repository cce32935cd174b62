"""What ``loopbot status`` shows: runs and reviews as a table or as JSON.

The JSON shape is a contract people script against (design.md): keys may be
added, never renamed. Nothing here reads config, so no secret can reach it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from bot.reviews import Review
from bot.store.base import RunRecord

__all__ = ["run_view", "review_view", "render_json", "render_table"]

#: What the ANSWER WITH column says of a review no longer open.
_NOT_OPEN = {"decided": "(being applied)", "failed": "(could not be applied: see the run's reason)"}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def run_view(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "loop": run.loop,
        "status": run.status,
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "review": run.review_id,
        "trigger": run.trigger,
        "iterations": run.iterations,
        "reason": run.reason,
        "result": run.result,
    }


def review_view(review: Review) -> dict[str, Any]:
    outcome = review.outcome
    return {
        "id": review.id,
        "run": review.run_id,
        "loop": review.loop,
        "status": review.status,
        "checkpoint": review.checkpoint_id,
        "approvals": len(review.approvals),
        "required": review.policy.approvals_required,
        "votes": [
            {"voter": v.voter, "decision": v.decision.name.lower(), "feedback": v.feedback, "at": _iso(v.at)}
            for v in review.votes
        ],
        "outcome": None if outcome is None else {
            "decision": outcome.decision.name.lower(),
            "decided_by": list(outcome.decided_by),
            "decided_at": _iso(outcome.decided_at),
            "timed_out": outcome.timed_out,
            "feedback": outcome.feedback,
        },
        "timed_out": outcome.timed_out if outcome is not None else review.timed_out_at is not None,
        "created_at": _iso(review.created_at),
        "paused_until": _iso(review.paused_until),
        "applied_at": _iso(review.applied_at),
    }


def render_json(runs: list[RunRecord], reviews: list[Review]) -> str:
    return json.dumps({"runs": [run_view(r) for r in runs], "reviews": [review_view(r) for r in reviews]}, indent=2)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*row).rstrip() for row in rows)]


def render_table(runs: list[RunRecord], reviews: list[Review], decide_command: str = "loopbot decide") -> str:
    lines: list[str] = []
    if runs:
        lines += _table(
            ["RUN", "LOOP", "STATUS", "UPDATED", "REVIEW", "REASON"],
            [
                [r.id, r.loop, r.status, _iso(r.updated_at) or "", r.review_id or "", (r.reason or "")[:60]]
                for r in runs
            ],
        )
    else:
        lines.append("no runs yet")
    pending = [r for r in reviews if r.status != "applied"]
    lines.append("")
    if pending:
        lines += _table(
            ["REVIEW", "RUN", "STATUS", "APPROVALS", "VOTES", "ANSWER WITH"],
            [
                [
                    r.id, r.run_id, r.status, f"{len(r.approvals)}/{r.policy.approvals_required}",
                    ", ".join(f"{v.voter}:{v.decision.name.lower()}" for v in r.votes) or "-",
                    f"{decide_command} {r.id} approve" if r.status == "open" else _NOT_OPEN.get(r.status, ""),
                ]
                for r in pending
            ],
        )
    else:
        lines.append("no open reviews")
    return "\n".join(lines)
