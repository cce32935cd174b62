"""Plain JSON data -> LoopState: the reading half of ``loop_engine.serialization``.

A stored document was written by another process, perhaps another version,
perhaps cut short or edited by hand; so every field is read by name and a
document of the wrong shape is a ``CorruptStateError`` saying what is wrong,
never a half-built state that fails later, far from the file. Decoders are
written out per class, like the encoders, because loading a large state
sits on the engine's resume path (issue 3, bench/persistence_bench.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .errors import CorruptStateError
from .jsonvalue import decode_datetime, decode_enum, gc_paused
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

__all__ = ["state_from_dict"]

# Plain dict lookups by member name: EnumType.__getitem__ and Enum.__hash__ are
# Python-level and showed up in profiles of large states.
_STEP_STATUS = dict(StepStatus.__members__)
_FAILURE_TYPE = dict(FailureType.__members__)
_FAILURE_STATUS = dict(FailureStatus.__members__)
_STRATEGY = dict(RecoveryStrategy.__members__)
_fromiso = datetime.fromisoformat


def _member(table: dict[str, Any], name: Any, label: str) -> Any:
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"{label}: {name!r} is not one of {', '.join(table)}") from None


def _check_header(state: LoopState) -> None:
    """The fields the engine computes with: a wrong type here would fail far from the file."""
    for name in ("current_iteration", "checkpoint_counter", "consecutive_failures"):
        value = getattr(state, name)
        if type(value) is not int or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    for name in ("metadata", "counters"):
        if type(getattr(state, name)) is not dict:
            raise ValueError(f"{name} must be an object, got {getattr(state, name)!r}")
    for name in ("trace_id", "stop_reason"):
        value = getattr(state, name)
        if value is not None and type(value) is not str:
            raise ValueError(f"{name} must be a string or null, got {value!r}")


def _dt(value: str | None) -> datetime | None:
    return None if value is None else _fromiso(value)


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
        created_at=_fromiso(d["created_at"]),
        version=d["version"],
    )


def _observation_from(d: dict[str, Any]) -> Observation:
    return Observation(
        timestamp=_fromiso(d["timestamp"]),
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
        timestamp=_fromiso(d["timestamp"]),
        step_id=d["step_id"],
    )


def _failure_from(d: dict[str, Any]) -> Failure:
    return Failure(
        type=_member(_FAILURE_TYPE, d["type"], "failure type"),
        message=d["message"],
        step_id=d["step_id"],
        recoverable=d["recoverable"],
        context=d["context"],
        timestamp=_fromiso(d["timestamp"]),
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
        timestamp=_fromiso(d["timestamp"]),
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


def _review_from(d: dict[str, Any] | None) -> ReviewRequest | None:
    return None if d is None else ReviewRequest.from_dict(d)


def _current_step_from(d: dict[str, Any] | None, plan: Plan | None) -> Step | None:
    if d is None:
        return None
    if "plan_index" in d:
        if plan is None:
            raise ValueError("current_step refers to a plan step but the state has no plan")
        index = d["plan_index"]
        if not 0 <= index < len(plan.steps):
            raise ValueError(f"current_step refers to plan step {index} but the plan has {len(plan.steps)} steps")
        return plan.steps[index]
    return _step_from(d["step"])


def state_from_dict(data: dict[str, Any]) -> LoopState:
    """The ``LoopState`` that ``state_to_dict`` described.

    A document of the wrong shape raises ``CorruptStateError`` saying what is
    missing or wrong; callers that know the file add its name. ``data`` is
    not modified, but free-form values (outputs, metadata) are shared with it.
    """
    try:
        with gc_paused():
            plan = None if data["current_plan"] is None else _plan_from(data["current_plan"])
            if plan is not None:
                plan.check_shape()
            state = LoopState(
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
                pending_review=_review_from(data["pending_review"]),
                decisions=[ReviewResponse.from_dict(d) for d in data["decisions"]],
                consecutive_failures=data["consecutive_failures"],
            )
            _check_header(state)
            return state
    except KeyError as exc:
        raise CorruptStateError(f"state document is missing key {exc.args[0]!r}") from None
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise CorruptStateError(f"state document is malformed: {exc}") from None
