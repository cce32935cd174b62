"""Resume: every human decision, exactly-once application, and crash recovery.

Each paused state goes through the JSON round trip and is resumed by a
fresh engine with the same components, as another process would.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from loop_engine.components import CallableActor
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.errors import PlanValidationError
from loop_engine.review import HumanDecision, ReviewResponse
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import state_to_dict
from loop_engine.state_machine import TRANSITIONS, derive_result_status
from loop_engine.types import (
    ComponentType,
    ExecutionState,
    FailureStatus,
    LoopContext,
    LoopState,
    LoopStatus,
    StepStatus,
)

from .loops import RecordingPersistence, checkpoint, flaky_actor, make_engine


class GiveUp:
    def recover(self, failure: Any, state: Any, context: Any) -> None:
        return None


def failing_engine(bad: dict[str, int] | None = None, **kwargs: Any) -> LoopEngine:
    """Step 2 fails once; recovery gives up, so a major-failure checkpoint pauses the run."""
    engine = make_engine(["a", "b", "c"], act=flaky_actor(bad or {"step_2": 1}), checkpoint=checkpoint(), **kwargs)
    engine.register_component(ComponentType.RECOVERY, GiveUp())
    return engine


def round_trip(state: LoopState) -> LoopState:
    return state_from_dict(json.loads(json.dumps(state_to_dict(state))))


async def paused_at_failure() -> LoopState:
    engine = failing_engine()
    result = await engine.run(LoopContext(goal="g", initial_context={"a": 1}), trace_id="r-1")
    assert result.status is LoopStatus.PAUSED and result.review_request.checkpoint_id == "checkpoint_0001"
    return round_trip(engine.state)


def answer(state: LoopState, decision: HumanDecision, **kwargs: Any) -> ReviewResponse:
    assert state.pending_review is not None
    return ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=decision, **kwargs)


def check_consistent(engine: LoopEngine, result: Any) -> None:
    assert derive_result_status(engine.state) is result.status
    for a, b in engine.state.transitions:
        assert ExecutionState(b) in TRANSITIONS[ExecutionState(a)]


@pytest.mark.parametrize("decision", [HumanDecision.APPROVE, HumanDecision.RETRY])
async def test_approve_and_retry_rerun_the_failed_step(decision: HumanDecision) -> None:
    state = await paused_at_failure()
    engine = failing_engine()
    result = await engine.resume(state, answer(state, decision, reviewer="bob"))
    assert result.status is LoopStatus.COMPLETED
    assert result.plan.get_step("step_2").attempts == 2
    [failure] = result.failures
    assert failure.status is FailureStatus.RECOVERED and failure.recovery_attempts == 0  # reset by the human
    assert [d.decision for d in state.decisions] == [decision] and state.pending_review is None
    check_consistent(engine, result)


async def test_reject_fails_with_the_feedback_as_reason() -> None:
    state = await paused_at_failure()
    engine = failing_engine()
    result = await engine.resume(state, answer(state, HumanDecision.REJECT, feedback="wrong approach"))
    assert result.status is LoopStatus.FAILED and state.status is LoopStatus.FAILED
    assert state.stop_reason == "wrong approach" and result.reason == "wrong approach"
    assert result.failures[0].status is FailureStatus.TERMINAL
    check_consistent(engine, result)


async def test_pause_keeps_waiting_and_records_the_decision() -> None:
    state = await paused_at_failure()
    open_id = state.pending_review.checkpoint_id
    result = await failing_engine().resume(state, answer(state, HumanDecision.PAUSE, feedback="till monday"))
    assert result.status is LoopStatus.PAUSED and state.execution_state is ExecutionState.WAITING_FOR_HUMAN
    assert state.pending_review is not None and state.pending_review.checkpoint_id == open_id
    assert [d.decision for d in state.decisions] == [HumanDecision.PAUSE]
    later = await failing_engine().resume(state, answer(state, HumanDecision.APPROVE))
    assert later.status is LoopStatus.COMPLETED


async def test_modify_step_output_completes_the_step() -> None:
    state = await paused_at_failure()
    step_fields = {"output": "good", "metadata": {"by": "eve"}}
    response = answer(state, HumanDecision.MODIFY, modifications={"step": step_fields})
    engine = failing_engine()
    result = await engine.resume(state, response)
    assert result.status is LoopStatus.COMPLETED
    step = result.plan.get_step("step_2")
    assert step.attempts == 1 and step.output == "good" and step.metadata["by"] == "eve"
    assert result.failures[0].status is FailureStatus.RECOVERED


async def test_modify_plan_skip_ends_partially_completed() -> None:
    state = await paused_at_failure()
    response = answer(state, HumanDecision.MODIFY, modifications={"plan": {"skip": ["step_2"]}})
    result = await failing_engine().resume(state, response)
    assert result.execution_state is ExecutionState.PARTIALLY_COMPLETED and result.status is LoopStatus.COMPLETED
    assert result.plan.get_step("step_2").status is StepStatus.SKIPPED


async def test_modify_context_description_and_added_step_then_continue() -> None:
    state = await paused_at_failure()
    seen: list[tuple[str, str, Any]] = []
    inner = flaky_actor({})

    def act(step: Any, observations: Any, context: LoopContext) -> str:
        seen.append((step.id, step.description, context.initial_context.get("hint")))
        return inner(step, observations, context)

    modifications = {
        "context": {"hint": "use v2"},
        "step": {"description": "b, carefully"},
        "plan": {"add": [{"id": "extra", "description": "d", "dependencies": ["step_3"]}]},
    }
    engine = failing_engine()
    engine.register_component(ComponentType.ACTOR, CallableActor(act), allow_replace=True)
    result = await engine.resume(state, answer(state, HumanDecision.MODIFY, modifications=modifications))
    assert result.status is LoopStatus.COMPLETED
    assert seen == [("step_2", "b, carefully", "use v2"), ("step_3", "c", "use v2"), ("extra", "d", "use v2")]
    assert state.context.initial_context == {"a": 1, "hint": "use v2"} and result.plan.version == 2


@pytest.mark.parametrize(
    ("modifications", "error", "match"),
    [
        ({"colour": "red"}, ValueError, "unknown modification key"),
        ({"plan": {"skip": ["nope"]}}, PlanValidationError, "the run's plan does not have: nope"),
        ({"plan": {"add": [{"id": "x", "dependencies": ["ghost"]}]}}, PlanValidationError, "ghost"),
        ({"step": {"colour": 1}}, ValueError, "keys from"),
    ],
)
async def test_bad_modify_is_refused_before_anything_is_recorded(modifications: Any, error: type, match: str) -> None:
    state = await paused_at_failure()
    with pytest.raises(error, match=match):
        await failing_engine().resume(state, answer(state, HumanDecision.MODIFY, modifications=modifications))
    assert state.decisions == [] and state.pending_review is not None


async def test_wrong_checkpoint_id_is_refused_naming_both_ids() -> None:
    state = await paused_at_failure()
    wrong = ReviewResponse(checkpoint_id="checkpoint_0009", decision=HumanDecision.APPROVE)
    with pytest.raises(ValueError, match="checkpoint_0009.*checkpoint_0001"):
        await failing_engine().resume(state, wrong)
    assert state.decisions == []


async def test_a_response_to_a_run_that_is_not_waiting_is_refused() -> None:
    engine = make_engine(["a"])
    await engine.run(LoopContext(goal="g"))
    with pytest.raises(ValueError, match="is completed, not waiting for a human"):
        response = ReviewResponse(checkpoint_id="checkpoint_0001", decision=HumanDecision.APPROVE)
        await engine.resume(engine.state, response)


class Killed(BaseException):
    """Stands in for SIGKILL: nothing in the engine may catch it."""


class Snapshots(RecordingPersistence):
    """Keeps each save as the JSON document a store would hold, to be loaded as the next process would."""

    def __init__(self) -> None:
        super().__init__()
        self.documents: list[dict[str, Any]] = []

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        self.documents.append(json.loads(json.dumps(state_to_dict(state))))


async def decided_then_killed() -> LoopState:
    """The snapshot saved with carol's decision when the process died before applying it (no review pending)."""
    state = await paused_at_failure()
    snapshots = Snapshots()

    def crash(step: Any, observations: Any, context: Any) -> str:
        raise Killed()  # right after the decision was saved

    engine = failing_engine(persistence=snapshots)
    engine.register_component(ComponentType.ACTOR, CallableActor(crash), allow_replace=True)
    with pytest.raises(Killed):
        await engine.resume(state, answer(state, HumanDecision.APPROVE, reviewer="carol"))
    return state_from_dict(next(s for s in snapshots.documents if s["decisions"]))


async def test_decision_is_saved_before_it_is_applied_and_applied_once_on_resume() -> None:
    decided = await decided_then_killed()
    assert decided.execution_state is ExecutionState.WAITING_FOR_HUMAN and decided.pending_review is None
    assert [d.reviewer for d in decided.decisions] == ["carol"]
    result = await failing_engine().resume(decided)  # no response: the recorded decision is applied
    assert result.status is LoopStatus.COMPLETED and len(decided.decisions) == 1


async def test_resume_without_response_continues_an_interrupted_iteration() -> None:
    snapshots = Snapshots()
    calls: list[str] = []

    def act(step: Any, observations: Any, context: Any) -> str:
        calls.append(step.id)
        if step.id == "step_2" and calls.count("step_2") == 1:
            raise Killed()
        return "good"

    engine = make_engine(["a", "b", "c"], act=act, persistence=snapshots)
    with pytest.raises(Killed):
        await engine.run(LoopContext(goal="g"), trace_id="crash-1")
    last = state_from_dict(snapshots.documents[-1])
    assert last.execution_state is ExecutionState.ACTING
    assert last.current_step is not None and last.current_step.status is StepStatus.IN_PROGRESS
    fresh = make_engine(["a", "b", "c"], act=act)
    result = await fresh.resume(last)
    assert result.status is LoopStatus.COMPLETED and result.iterations == 3
    assert calls == ["step_1", "step_2", "step_2", "step_3"]
    assert result.plan.get_step("step_2").attempts == 1
    assert ("acting", "iteration_complete") in last.transitions
    check_consistent(fresh, result)


async def test_resume_of_a_finished_run_changes_nothing() -> None:
    engine = make_engine(["a"])
    first = await engine.run(LoopContext(goal="g"))
    before = list(engine.state.transitions)
    again = await make_engine(["a"]).resume(engine.state)
    assert again.status is first.status and engine.state.transitions == before


async def test_boundary_retry_reruns_the_current_step() -> None:
    engine = make_engine(["a", "b"], checkpoint=checkpoint(trigger_every_n_iterations=1), config=LoopConfig())
    await engine.run(LoopContext(goal="g"))
    state = round_trip(engine.state)
    fresh = make_engine(["a", "b"], checkpoint=checkpoint(trigger_every_n_iterations=1))
    result = await fresh.resume(state, answer(state, HumanDecision.RETRY))
    assert result.status is LoopStatus.PAUSED  # the next boundary asks again
    assert state.current_plan.get_step("step_1").attempts == 2 and state.current_iteration == 2
