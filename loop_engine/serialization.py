"""LoopState <-> plain JSON data, every field, so a run can resume in another process.

``state_from_dict(json.loads(json.dumps(state_to_dict(s)))) == s`` for every
state whose free-form values (step outputs, observation contents, metadata,
contexts) are JSON values. Anything else is refused at save time with the
place it was found (``NotJSONSerialisableError``), never stored as ``str()``.
Enums are stored by name, datetimes as ISO-8601, and ``current_step`` as a
reference to the plan's step when it is one (so it is the same object again
after loading). The encoders are written out per class rather than using
``dataclasses.asdict``: one pass, no deep copies of what JSON copies anyway.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .errors import CorruptStateError
from .jsonvalue import decode_datetime, decode_enum, encode_datetime, json_copy
from .review import ReviewRequest, ReviewResponse
from .types import (
    Budget,
    Evaluation,
    ExecutionState,
    Failure,
    FailureStatus,
    FailureType,
    LoopContext,
    LoopState,
    LoopStatus,
    Observation,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    Step,
    StepStatus,
)

__all__ = ["SCHEMA_VERSION", "state_to_dict", "state_from_dict"]

#: Bump when the shape of ``state_to_dict`` changes; older readers refuse newer documents.
SCHEMA_VERSION = 1


# --- encoding -----------------------------------------------------------------


def _step(step: Step, kind: str = "step") -> dict[str, Any]:
    start, end = step.start_time, step.end_time
    return {
        "id": step.id,
        "description": step.description,
        "dependencies": list(step.dependencies),
        "status": step.status._name_,
        "output": json_copy(step.output, (kind, step.id, "output")),
        "start_time": None if start is None else start.isoformat(),
        "end_time": None if end is None else end.isoformat(),
        "metadata": json_copy(step.metadata, (kind, step.id, "metadata")),
        "evaluation_passed": step.evaluation_passed,
        "verification_passed": step.verification_passed,
        "attempts": step.attempts,
    }


def _plan(plan: Plan) -> dict[str, Any]:
    return {
        "id": plan.id,
        "goal": plan.goal,
        "steps": [_step(s) for s in plan.steps],
        "context": json_copy(plan.context, ("plan", plan.id, "context")),
        "created_at": plan.created_at.isoformat(),
        "version": plan.version,
    }


def _current_step(state: LoopState) -> dict[str, Any] | None:
    step = state.current_step
    if step is None:
        return None
    if state.current_plan is not None:
        for index, candidate in enumerate(state.current_plan.steps):
            if candidate is step:
                return {"plan_index": index}
    return {"step": _step(step, "current step")}


def _observation(obs: Observation, index: int) -> dict[str, Any]:
    return {
        "timestamp": obs.timestamp.isoformat(),
        "content": json_copy(obs.content, ("observation", index, "content")),
        "source": obs.source,
        "step_id": obs.step_id,
        "metadata": json_copy(obs.metadata, ("observation", index, "metadata")),
    }


def _evaluation(ev: Evaluation, index: int) -> dict[str, Any]:
    return {
        "score": json_copy(ev.score, ("evaluation", index, "score")),
        "passed": ev.passed,
        "feedback": ev.feedback,
        "metrics": json_copy(ev.metrics, ("evaluation", index, "metrics")),
        "timestamp": ev.timestamp.isoformat(),
        "step_id": ev.step_id,
    }


def _failure(f: Failure) -> dict[str, Any]:
    return {
        "type": f.type._name_,
        "message": f.message,
        "step_id": f.step_id,
        "recoverable": f.recoverable,
        "context": json_copy(f.context, ("failure", f.failure_id, "context")),
        "timestamp": f.timestamp.isoformat(),
        "failure_id": f.failure_id,
        "status": f.status._name_,
        "recovery_attempts": f.recovery_attempts,
        "max_recovery_attempts": f.max_recovery_attempts,
        "recovery_action_ids": list(f.recovery_action_ids),
        "source_component": f.source_component,
        "evidence": json_copy(f.evidence, ("failure", f.failure_id, "evidence")),
    }


def _recovery(r: RecoveryAction) -> dict[str, Any]:
    return {
        "strategy": r.strategy._name_,
        "params": json_copy(r.params, ("recovery", r.action_id, "params")),
        "estimated_success": json_copy(r.estimated_success, ("recovery", r.action_id, "estimated_success")),
        "action_id": r.action_id,
        "failure_id": r.failure_id,
        "timestamp": r.timestamp.isoformat(),
        "executed": r.executed,
        "success": r.success,
        "reason": r.reason,
    }


def _budget(b: Budget) -> dict[str, Any]:
    return json_copy(
        {
            "max_tokens": b.max_tokens,
            "max_steps": b.max_steps,
            "max_time_seconds": b.max_time_seconds,
            "max_cost": b.max_cost,
            "tokens_used": b.tokens_used,
            "steps_used": b.steps_used,
            "time_used": b.time_used,
            "cost_used": b.cost_used,
        },
        "budget",
    )


def _context(ctx: LoopContext | None) -> dict[str, Any] | None:
    if ctx is None:
        return None
    return {
        "goal": ctx.goal,
        "initial_context": json_copy(ctx.initial_context, "context initial_context"),
        "budget": _budget(ctx.budget),
        "metadata": json_copy(ctx.metadata, "context metadata"),
    }


def state_to_dict(state: LoopState) -> dict[str, Any]:
    """Plain JSON data for ``state``; raises ``NotJSONSerialisableError`` naming any bad value."""
    return {
        "status": state.status.name,
        "execution_state": state.execution_state.name,
        "current_iteration": state.current_iteration,
        "current_plan": None if state.current_plan is None else _plan(state.current_plan),
        "current_step": _current_step(state),
        "observations": [_observation(o, i) for i, o in enumerate(state.observations)],
        "evaluations": [_evaluation(e, i) for i, e in enumerate(state.evaluations)],
        "failures": [_failure(f) for f in state.failures],
        "recoveries": [_recovery(r) for r in state.recoveries],
        "counters": json_copy(state.counters, "counters"),
        "metadata": json_copy(state.metadata, "state metadata"),
        "context": _context(state.context),
        "trace_id": state.trace_id,
        "stop_reason": state.stop_reason,
        "started_at": encode_datetime(state.started_at),
        "updated_at": encode_datetime(state.updated_at),
        "transitions": [[source, target] for source, target in state.transitions],
        "checkpoint_counter": state.checkpoint_counter,
        "reviewed_causes": list(state.reviewed_causes),
        "pending_review": None if state.pending_review is None else state.pending_review.to_dict(),
        "decisions": [d.to_dict() for d in state.decisions],
        "consecutive_failures": state.consecutive_failures,
    }


# --- decoding -----------------------------------------------------------------
# Plain dict lookups by member name: EnumType.__getitem__ and Enum.__hash__ are
# Python-level and showed up in profiles of large states.
_STEP_STATUS = dict(StepStatus.__members__)
_FAILURE_TYPE = dict(FailureType.__members__)
_FAILURE_STATUS = dict(FailureStatus.__members__)
_STRATEGY = dict(RecoveryStrategy.__members__)


def _member(table: dict[str, Any], name: Any, label: str) -> Any:
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"{label}: {name!r} is not one of {', '.join(table)}") from None


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)



def _step_from(d: dict[str, Any]) -> Step:
    return Step(
        id=d["id"],
        description=d["description"],
        dependencies=list(d["dependencies"]),
        status=_member(_STEP_STATUS, d["status"], "step status"),
        output=d["output"],
        start_time=_dt(d["start_time"]),
        end_time=_dt(d["end_time"]),
        metadata=d["metadata"],
        evaluation_passed=d["evaluation_passed"],
        verification_passed=d["verification_passed"],
        attempts=d["attempts"],
    )


def _plan_from(d: dict[str, Any]) -> Plan:
    return Plan(
        id=d["id"],
        goal=d["goal"],
        steps=[_step_from(s) for s in d["steps"]],
        context=d["context"],
        created_at=datetime.fromisoformat(d["created_at"]),
        version=d["version"],
    )


def _observation_from(d: dict[str, Any]) -> Observation:
    return Observation(
        timestamp=datetime.fromisoformat(d["timestamp"]),
        content=d["content"],
        source=d["source"],
        step_id=d["step_id"],
        metadata=d["metadata"],
    )


def _evaluation_from(d: dict[str, Any]) -> Evaluation:
    return Evaluation(
        score=d["score"],
        passed=d["passed"],
        feedback=d["feedback"],
        metrics=d["metrics"],
        timestamp=datetime.fromisoformat(d["timestamp"]),
        step_id=d["step_id"],
    )


def _failure_from(d: dict[str, Any]) -> Failure:
    return Failure(
        type=_member(_FAILURE_TYPE, d["type"], "failure type"),
        message=d["message"],
        step_id=d["step_id"],
        recoverable=d["recoverable"],
        context=d["context"],
        timestamp=datetime.fromisoformat(d["timestamp"]),
        failure_id=d["failure_id"],
        status=_member(_FAILURE_STATUS, d["status"], "failure status"),
        recovery_attempts=d["recovery_attempts"],
        max_recovery_attempts=d["max_recovery_attempts"],
        recovery_action_ids=list(d["recovery_action_ids"]),
        source_component=d["source_component"],
        evidence=d["evidence"],
    )


def _recovery_from(d: dict[str, Any]) -> RecoveryAction:
    return RecoveryAction(
        strategy=_member(_STRATEGY, d["strategy"], "recovery strategy"),
        params=d["params"],
        estimated_success=d["estimated_success"],
        action_id=d["action_id"],
        failure_id=d["failure_id"],
        timestamp=datetime.fromisoformat(d["timestamp"]),
        executed=d["executed"],
        success=d["success"],
        reason=d["reason"],
    )


def _context_from(d: dict[str, Any] | None) -> LoopContext | None:
    if d is None:
        return None
    return LoopContext(
        goal=d["goal"], initial_context=d["initial_context"], budget=Budget(**d["budget"]), metadata=d["metadata"]
    )


def _current_step_from(d: dict[str, Any] | None, plan: Plan | None) -> Step | None:
    if d is None:
        return None
    if "plan_index" in d:
        if plan is None:
            raise ValueError("current_step refers to a plan step but the state has no plan")
        return plan.steps[d["plan_index"]]
    return _step_from(d["step"])


def state_from_dict(data: dict[str, Any]) -> LoopState:
    """The ``LoopState`` that ``state_to_dict`` described.

    A document of the wrong shape raises ``CorruptStateError`` saying what is
    missing or wrong; callers that know the file add its name.
    """
    try:
        plan = None if data["current_plan"] is None else _plan_from(data["current_plan"])
        return LoopState(
            status=decode_enum(LoopStatus, data["status"], "status"),
            execution_state=decode_enum(ExecutionState, data["execution_state"], "execution_state"),
            current_iteration=data["current_iteration"],
            current_plan=plan,
            current_step=_current_step_from(data["current_step"], plan),
            observations=[_observation_from(o) for o in data["observations"]],
            evaluations=[_evaluation_from(e) for e in data["evaluations"]],
            failures=[_failure_from(f) for f in data["failures"]],
            recoveries=[_recovery_from(r) for r in data["recoveries"]],
            counters=dict(data["counters"]),
            metadata=data["metadata"],
            context=_context_from(data["context"]),
            trace_id=data["trace_id"],
            stop_reason=data["stop_reason"],
            started_at=decode_datetime(data["started_at"], "started_at"),
            updated_at=decode_datetime(data["updated_at"], "updated_at"),
            transitions=[(source, target) for source, target in data["transitions"]],
            checkpoint_counter=data["checkpoint_counter"],
            reviewed_causes=list(data["reviewed_causes"]),
            pending_review=None if data["pending_review"] is None else ReviewRequest.from_dict(data["pending_review"]),
            decisions=[ReviewResponse.from_dict(d) for d in data["decisions"]],
            consecutive_failures=data["consecutive_failures"],
        )
    except KeyError as exc:
        raise CorruptStateError(f"state document is missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise CorruptStateError(f"state document is malformed: {exc}") from None
