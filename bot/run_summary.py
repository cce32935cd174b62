"""A run's result and snapshot as people see them: the summary kept with the run, where a stopped run stands."""

from __future__ import annotations

import json
from typing import Any

from loop_engine.deserialization import state_from_dict
from loop_engine.types import LoopResult

__all__ = ["result_summary", "saved_progress"]


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def result_summary(result: LoopResult) -> dict[str, Any]:
    """What ``status --json`` shows of a finished run; the full state stays in the snapshot."""
    plan = result.plan
    return {
        "status": result.status.name,
        "execution_state": result.execution_state.value if result.execution_state else None,
        "iterations": result.iterations,
        "reason": result.reason,
        "output": _jsonable(result.output),
        "steps": {step.id: step.status.value for step in plan.steps} if plan else {},
        "failures": [_failure_view(f) for f in result.failures if f.status.name != "RECOVERED"],
    }


def _failure_view(failure: Any) -> dict[str, Any]:
    """A failure as ``status --json`` shows it: with the file and line when the loop's own code raised."""
    view: dict[str, Any] = {"step": failure.step_id, "source": failure.source_component, "message": failure.message}
    at = failure.evidence.get("raised_at") if isinstance(failure.evidence, dict) else None
    if isinstance(at, dict):
        view.update(file=at.get("file"), line=at.get("line"))
    return view


def saved_progress(snapshot: dict[str, Any] | None) -> str:
    """Where a stopped run's snapshot stands, for the person who stopped it: "after step 2 of 4"."""
    plan = state_from_dict(snapshot).current_plan if snapshot is not None else None
    done = sum(1 for step in plan.steps if step.is_completed()) if plan is not None else 0
    return f"after step {done} of {len(plan.steps)}" if plan is not None and done else "before its first step"
