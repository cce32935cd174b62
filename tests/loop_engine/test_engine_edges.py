"""Edges found by review: decisions on runs that cannot take them, and what a human answer resets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.errors import ConfigurationError, PlanValidationError
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig
from loop_engine.review import HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import (
    ComponentType,
    ExecutionState,
    FailureStatus,
    LoopContext,
    LoopStatus,
    Observation,
    Plan,
    RecoveryStrategy,
    Step,
)

from .loops import checkpoint, decide, flaky_actor, make_engine
from .test_engine_guards import ReplacingPlanner
from .test_recovery import Always


def answering(*answers: ReviewResponse | HumanDecision) -> tuple[list[ReviewRequest], Any]:
    """A decision handler giving ``answers`` in turn (then APPROVE), recording what it was asked."""
    asked: list[ReviewRequest] = []

    def handler(request: ReviewRequest) -> ReviewResponse:
        asked.append(request)
        answer = answers[len(asked) - 1] if len(asked) <= len(answers) else HumanDecision.APPROVE
        if isinstance(answer, HumanDecision):
            return decide(answer)(request)
        return ReviewResponse(checkpoint_id=request.checkpoint_id, decision=answer.decision,
                              modifications=answer.modifications)

    return asked, handler


async def test_a_review_that_cannot_be_recorded_fails_the_run_without_leaving_it_open(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    cp = HumanCheckpoint(CheckpointConfig(trigger_every_n_iterations=1, checkpoint_dir=str(tmp_path / "file" / "cp")))
    engine = make_engine(["a", "b"], checkpoint=cp)
    with pytest.raises(OSError):
        await engine.run(LoopContext(goal="g"))
    state = engine.state
    assert state.execution_state is ExecutionState.FAILED and state.pending_review is None
    assert state.checkpoint_counter == 0 and state.reviewed_causes == []  # nothing half-recorded
    late = ReviewResponse(checkpoint_id="checkpoint_0001", decision=HumanDecision.REJECT)
    with pytest.raises(ValueError, match="is failed, not waiting for a human"):
        await make_engine(["a", "b"]).resume(state, late)


async def test_an_approval_gives_the_step_a_fresh_run_at_the_circuit_breaker_too() -> None:
    asked, handler = answering(HumanDecision.APPROVE)
    engine = make_engine(["a"], act=flaky_actor({"step_1": 5}), checkpoint=checkpoint(handler))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED, result.reason
    assert len(asked) == 1 and engine.state.consecutive_failures == 0


async def test_after_a_plan_revision_the_current_step_is_the_plans_step() -> None:
    asked, handler = answering()
    engine = make_engine(["a", "b"], act=lambda step, *_: "bad" if step.id == "step_2" else "good",
                         checkpoint=checkpoint(handler, trigger_every_n_iterations=1))
    engine.register_component(ComponentType.PLANNER, ReplacingPlanner(["a", "b"]), allow_replace=True)
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.PLAN_REVISION))
    await engine.run(LoopContext(goal="g"))
    after_revision = asked[1].state_summary["current_step"]
    assert after_revision.startswith("step_2_r:")
    plan = engine.state.current_plan
    assert plan is not None and engine.state.current_step is plan.get_step(engine.state.current_step.id)


async def test_modify_with_an_output_at_a_boundary_pause_recovers_that_steps_failure() -> None:
    asked, handler = answering(ReviewResponse(checkpoint_id="", decision=HumanDecision.MODIFY,
                                              modifications={"step": {"output": "good"}}))
    engine = make_engine(["a", "b"], act=flaky_actor({"step_1": 99}),
                         checkpoint=checkpoint(handler, trigger_every_n_iterations=1))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    (failure,) = result.failures
    assert failure.status is FailureStatus.RECOVERED and [r.success for r in result.recoveries] == [True]


class RaisesOnce:
    def __init__(self) -> None:
        self.calls = 0

    def should_terminate(self, state: Any, goal: str, context: Any) -> bool:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("terminator hiccup")
        return False


async def test_a_stepless_failure_a_human_let_pass_is_recovered_once_its_component_works() -> None:
    asked, handler = answering(HumanDecision.APPROVE)
    engine = make_engine(["a"], checkpoint=checkpoint(handler))
    engine.register_component(ComponentType.TERMINATOR, RaisesOnce())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and len(asked) == 1
    (failure,) = result.failures
    assert failure.source_component == "terminator" and failure.status is FailureStatus.RECOVERED


async def test_markdown_snapshots_take_any_output(tmp_path: Path) -> None:
    persistence = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path, format="markdown"))
    engine = make_engine(["a"], act=lambda *a: ("result", 42), evaluate=False, persistence=persistence)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and not result.failures


async def test_with_json_snapshots_a_non_json_observation_is_the_observers_failure(tmp_path: Path) -> None:
    class Odd:
        def observe(self, output: Any, step: Step, context: Any) -> Observation:
            return Observation(content={1, 2}, step_id=step.id)

    persistence = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path, format="json"))
    engine = make_engine(["a"], evaluate=False, persistence=persistence)
    engine.register_component(ComponentType.OBSERVER, Odd())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    (failure,) = result.failures
    assert failure.source_component == "observer" and "observation of step 'step_1'" in failure.message
    assert persistence.load(engine.state.trace_id or "").execution_state is ExecutionState.FAILED  # disk agrees


async def test_with_json_snapshots_non_json_inputs_are_refused_before_the_run(tmp_path: Path) -> None:
    persistence = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path, format="json"))
    with pytest.raises(ConfigurationError, match="LoopContext.initial_context"):
        await make_engine(["a"], persistence=persistence).run(LoopContext(goal="g", initial_context={"s": {1}}))


def test_step_metadata_must_be_a_dict() -> None:
    with pytest.raises(PlanValidationError, match="has metadata None; use a dict"):
        Plan(steps=[Step(id="a", metadata=None)]).validate()  # type: ignore[arg-type]
