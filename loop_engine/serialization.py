"""LoopState -> plain JSON data, every field, so a run can resume in another process.

``state_from_dict(json.loads(json.dumps(state_to_dict(s)))) == s`` for every
state whose free-form values (step outputs, observation contents, metadata,
contexts) are JSON values. Anything else is refused at save time with the
place it was found (``NotJSONSerialisableError``), never stored as ``str()``.
Enums are stored by name, datetimes as ISO-8601, and ``current_step`` as a
reference to the plan's step when it is one (so it is the same object again
after loading). Reading a document back is ``loop_engine.deserialization``.

Speed matters because the engine saves at every iteration boundary (issue 3:
save + load of a 1,000-step state <= 15 ms; see bench/persistence_bench.py).
Hence: encoders written out per class that check free-form values in place
instead of copying them (no ``dataclasses.asdict``); naive datetimes left for
orjson to format in C (``isoformat()`` cost more than the whole JSON
encoding); ``state_to_dict`` is the encoded bytes read back, so there is one
encoder; and the cyclic garbage collector is paused while the tens of
thousands of acyclic objects of a large state are made.
"""

from __future__ import annotations

from typing import Any

import orjson

from .jsonvalue import (
    NotJSONSerialisableError,
    check_json,
    gc_paused,
    locate_bad_string,
    orjson_datetime,
    orjson_default,
)
from .types import Budget, Evaluation, Failure, LoopContext, LoopState, Observation, Plan, RecoveryAction, Step

__all__ = ["SCHEMA_VERSION", "state_to_dict", "encode_state"]

#: Bump when the shape of ``state_to_dict`` changes; older readers refuse newer documents.
SCHEMA_VERSION = 1


# The document is built for orjson: free-form values are checked in place (not
# copied) and naive datetimes are left as objects for orjson to format.


def _step(step: Step, kind: str = "step") -> dict[str, Any]:
    return {
        "id": step.id,
        "description": step.description,
        "dependencies": step.dependencies,
        "status": step.status._name_,
        "output": check_json(step.output, (kind, step.id, "output")),
        "start_time": orjson_datetime(step.start_time),
        "end_time": orjson_datetime(step.end_time),
        "metadata": check_json(step.metadata, (kind, step.id, "metadata")),
        "evaluation_passed": step.evaluation_passed,
        "verification_passed": step.verification_passed,
        "attempts": step.attempts,
    }


def _plan(plan: Plan) -> dict[str, Any]:
    return {
        "id": plan.id,
        "goal": plan.goal,
        "steps": [_step(s) for s in plan.steps],
        "context": check_json(plan.context, ("plan", plan.id, "context")),
        "created_at": orjson_datetime(plan.created_at),
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
        "timestamp": orjson_datetime(obs.timestamp),
        "content": check_json(obs.content, ("observation", index, "content")),
        "source": obs.source,
        "step_id": obs.step_id,
        "metadata": check_json(obs.metadata, ("observation", index, "metadata")),
    }


def _evaluation(ev: Evaluation, index: int) -> dict[str, Any]:
    return {
        "score": check_json(ev.score, ("evaluation", index, "score")),
        "passed": ev.passed,
        "feedback": ev.feedback,
        "metrics": check_json(ev.metrics, ("evaluation", index, "metrics")),
        "timestamp": orjson_datetime(ev.timestamp),
        "step_id": ev.step_id,
    }


def _failure(f: Failure) -> dict[str, Any]:
    return {
        "type": f.type._name_,
        "message": f.message,
        "step_id": f.step_id,
        "recoverable": f.recoverable,
        "context": check_json(f.context, ("failure", f.failure_id, "context")),
        "timestamp": orjson_datetime(f.timestamp),
        "failure_id": f.failure_id,
        "status": f.status._name_,
        "recovery_attempts": f.recovery_attempts,
        "max_recovery_attempts": f.max_recovery_attempts,
        "recovery_action_ids": f.recovery_action_ids,
        "source_component": f.source_component,
        "evidence": check_json(f.evidence, ("failure", f.failure_id, "evidence")),
    }


def _recovery(r: RecoveryAction) -> dict[str, Any]:
    return {
        "strategy": r.strategy._name_,
        "params": check_json(r.params, ("recovery", r.action_id, "params")),
        "estimated_success": check_json(r.estimated_success, ("recovery", r.action_id, "estimated_success")),
        "action_id": r.action_id,
        "failure_id": r.failure_id,
        "timestamp": orjson_datetime(r.timestamp),
        "executed": r.executed,
        "success": r.success,
        "reason": r.reason,
    }


def _budget(b: Budget) -> dict[str, Any]:
    return check_json(
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
        "initial_context": check_json(ctx.initial_context, "context initial_context"),
        "budget": _budget(ctx.budget),
        "metadata": check_json(ctx.metadata, "context metadata"),
    }


def _state(state: LoopState) -> dict[str, Any]:
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
        "counters": check_json(state.counters, "counters"),
        "metadata": check_json(state.metadata, "state metadata"),
        "context": _context(state.context),
        "trace_id": state.trace_id,
        "stop_reason": state.stop_reason,
        "started_at": orjson_datetime(state.started_at),
        "updated_at": orjson_datetime(state.updated_at),
        "transitions": [[source, target] for source, target in state.transitions],
        "checkpoint_counter": state.checkpoint_counter,
        "reviewed_causes": state.reviewed_causes,
        "pending_review": None if state.pending_review is None else state.pending_review.to_dict(),
        "decisions": [d.to_dict() for d in state.decisions],
        "consecutive_failures": state.consecutive_failures,
    }


def encode_state(state: LoopState) -> bytes:
    """The UTF-8 JSON document persistence writes: ``{"schema_version": N, "state": ...}``.

    Raises ``NotJSONSerialisableError`` naming any value that would not come
    back equal, including a string that is not valid Unicode (a lone surrogate).
    """
    with gc_paused():
        document = {"schema_version": SCHEMA_VERSION, "state": _state(state)}
        try:
            return orjson.dumps(document, default=orjson_default)
        except orjson.JSONEncodeError as exc:
            place = locate_bad_string(document["state"])
            if place is None:
                raise NotJSONSerialisableError(f"state could not be encoded as JSON: {exc}") from None
            raise NotJSONSerialisableError(
                f"state{place}: {exc}; store text as valid Unicode (no lone surrogates)"
            ) from None


def state_to_dict(state: LoopState) -> dict[str, Any]:
    """Plain JSON data for ``state``, sharing nothing with it; same checks as ``encode_state``."""
    with gc_paused():
        data: dict[str, Any] = orjson.loads(encode_state(state))["state"]
        return data
