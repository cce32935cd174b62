"""Checkpoints inside the engine: pause at boundaries and before terminal failures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from loop_engine.checkpoint import CheckpointConfig, CheckpointPresets, HumanCheckpoint
from loop_engine.components import ListPlanner
from loop_engine.review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import ComponentType, ExecutionState, FailureStatus, LoopContext, LoopStatus, RecoveryStrategy

from .loops import RecordingPersistence, checkpoint, decide, flaky_actor, make_engine
from .test_recovery import engine_with


async def test_iteration_boundary_pause_stops_paused_and_saves() -> None:
    sink = RecordingPersistence()
    engine = make_engine(["a", "b"], checkpoint=checkpoint(trigger_every_n_iterations=1), persistence=sink)
    result = await engine.run(LoopContext(goal="g"), trace_id="cp-1")
    assert result.status is LoopStatus.PAUSED and engine.state.status is LoopStatus.PAUSED
    assert engine.state.execution_state is ExecutionState.WAITING_FOR_HUMAN
    assert result.review_request is engine.state.pending_review
    assert result.review_request.trigger is CheckpointTrigger.ON_ITERATION_BOUNDARY
    assert engine.state.current_iteration == 1  # never at iteration 0
    assert sink.saves[-1] == ("cp-1", "waiting_for_human")


async def test_the_review_shows_the_run_as_waiting_not_running() -> None:
    engine = make_engine(["a", "b"], checkpoint=checkpoint(trigger_every_n_iterations=1))
    result = await engine.run(LoopContext(goal="g"), trace_id="cp-show")
    assert result.review_request is not None
    summary = result.review_request.state_summary
    assert (summary["status"], summary["execution_state"]) == ("PAUSED", "waiting_for_human")
    assert "- **Status:** PAUSED" in result.review_request.to_markdown()


class GiveUp:
    """A Recovery component that never recovers: every failure is terminal at once."""

    def recover(self, failure, state, context):  # type: ignore[no-untyped-def]
        return None


async def test_terminal_failure_asks_before_failing_when_major_failure_is_on() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), checkpoint=checkpoint(trigger_on_major_failure=True))
    engine.register_component(ComponentType.RECOVERY, GiveUp())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.PAUSED
    assert result.review_request.trigger is CheckpointTrigger.ON_MAJOR_FAILURE
    assert result.failures[0].status is FailureStatus.TERMINAL
    assert ("recovering", "waiting_for_human") in engine.state.transitions


async def test_a_retry_that_passes_on_its_last_attempt_is_not_interrupted() -> None:
    """Two bad attempts then a good one, within max_recovery_attempts=3: no human needed."""
    engine = make_engine(["a"], act=flaky_actor({"step_1": 3}), checkpoint=checkpoint(trigger_on_major_failure=True))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and result.review_request is None
    assert engine.state.checkpoint_counter == 0
    assert [f.status for f in result.failures] == [FailureStatus.RECOVERED]
    assert result.failures[0].recovery_attempts == 3


async def test_a_failure_past_its_last_attempt_asks_before_failing() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 4}), checkpoint=checkpoint(trigger_on_major_failure=True))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.PAUSED
    assert result.review_request.trigger is CheckpointTrigger.ON_MAJOR_FAILURE
    assert [r.strategy for r in result.recoveries] == [RecoveryStrategy.RETRY] * 3 + [RecoveryStrategy.HUMAN_HANDOFF]


async def test_without_major_failure_trigger_the_run_fails() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), checkpoint=checkpoint(trigger_on_major_failure=False))
    engine.register_component(ComponentType.RECOVERY, GiveUp())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and result.review_request is None
    assert engine.state.pending_review is None


async def test_a_handler_that_approves_runs_straight_through() -> None:
    asked: list[str] = []

    def approve(request):  # type: ignore[no-untyped-def]
        asked.append(request.checkpoint_id)
        return decide(HumanDecision.APPROVE, reviewer="alice")(request)

    engine = make_engine(["a", "b", "c"], checkpoint=checkpoint(approve, trigger_every_n_iterations=1))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert asked == ["checkpoint_0001", "checkpoint_0002", "checkpoint_0003"]
    assert [d.reviewer for d in engine.state.decisions] == ["alice"] * 3
    assert engine.state.pending_review is None
    assert engine.state.transitions.count(("iteration_complete", "waiting_for_human")) == 3


async def test_plan_complete_pause_then_approval_completes() -> None:
    engine = make_engine(["a"], checkpoint=checkpoint(decide(HumanDecision.APPROVE), trigger_on_plan_complete=True))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert ("waiting_for_human", "completed") in engine.state.transitions
    assert engine.state.decisions[0].checkpoint_id == "checkpoint_0001"


async def test_handler_answering_pause_leaves_the_run_waiting() -> None:
    engine = make_engine(["a", "b"], checkpoint=checkpoint(decide(HumanDecision.PAUSE), trigger_every_n_iterations=1))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.PAUSED and engine.state.pending_review is not None
    assert [d.decision for d in engine.state.decisions] == [HumanDecision.PAUSE]


async def test_external_request_pauses_at_the_next_boundary() -> None:
    cp = checkpoint(trigger_on_major_failure=False)
    cp.request_review("ops wants a look")
    engine = make_engine(["a"], checkpoint=cp)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.PAUSED
    assert result.review_request.trigger is CheckpointTrigger.ON_EXTERNAL_REQUEST
    assert ("planning", "waiting_for_human") in engine.state.transitions


async def test_the_pause_is_saved_before_the_handler_is_asked() -> None:
    """A handler that fails (Slack down, a bug) leaves a saved, answerable pause."""
    sink = RecordingPersistence()

    def broken(request):  # type: ignore[no-untyped-def]
        raise ConnectionError("slack unreachable")

    engine = make_engine(["a", "b"], checkpoint=checkpoint(broken, trigger_every_n_iterations=1), persistence=sink)
    with pytest.raises(ConnectionError):
        await engine.run(LoopContext(goal="g"), trace_id="cp-2")
    assert sink.saves[-1] == ("cp-2", "waiting_for_human")
    assert engine.state.pending_review is not None and engine.state.decisions == []


async def test_modify_after_a_planning_failure_plans_again_once() -> None:
    """MODIFY (new context) on a planning failure retries planning on the same
    failure; failing again ends the run instead of asking the human forever."""

    class DownPlanner(ListPlanner):
        def create_plan(self, goal, initial_context):  # type: ignore[no-untyped-def]
            raise RuntimeError("planner down")

    asked: list[str] = []

    def modify(request):  # type: ignore[no-untyped-def]
        asked.append(request.checkpoint_id)
        if len(asked) > 3:
            raise AssertionError(f"asked again and again: {asked}")
        return decide(HumanDecision.MODIFY, modifications={"context": {"hint": "try harder"}})(request)

    engine = make_engine(["a"], checkpoint=checkpoint(modify))
    engine.register_component(ComponentType.PLANNER, DownPlanner(["a"]), allow_replace=True)
    result = await engine.run(LoopContext(goal="g"))
    assert asked == ["checkpoint_0001"]
    assert result.status is LoopStatus.FAILED and "planner down" in (result.reason or "")
    [failure] = result.failures
    assert failure.status is FailureStatus.TERMINAL
    assert engine.state.context.initial_context == {"hint": "try harder"}


def _asked(answer: HumanDecision, **kwargs: object) -> tuple[list[ReviewRequest], object]:
    asked: list[ReviewRequest] = []

    def handler(request: ReviewRequest) -> ReviewResponse:
        asked.append(request)
        return decide(answer, **kwargs)(request)  # type: ignore[arg-type]

    return asked, handler


@pytest.mark.parametrize(
    ("answer", "kwargs", "status", "failure_status", "retry_success"),
    [
        (HumanDecision.APPROVE, {}, LoopStatus.COMPLETED, FailureStatus.RECOVERED, True),
        (HumanDecision.RETRY, {}, LoopStatus.COMPLETED, FailureStatus.RECOVERED, True),
        (HumanDecision.MODIFY, {"modifications": {"step": {"output": "good"}}}, LoopStatus.COMPLETED,
         FailureStatus.RECOVERED, True),
        (HumanDecision.REJECT, {"feedback": "stop"}, LoopStatus.FAILED, FailureStatus.TERMINAL, False),
    ],
)
async def test_an_on_failure_review_settles_the_failure_it_asked_about(
    answer: HumanDecision, kwargs: dict[str, object], status: LoopStatus,
    failure_status: FailureStatus, retry_success: bool,
) -> None:
    asked, handler = _asked(answer, **kwargs)
    engine = make_engine(["a", "b"], act=flaky_actor({"step_1": 1}),
                         checkpoint=checkpoint(handler, trigger_on_failure=True))  # type: ignore[arg-type]
    result = await engine.run(LoopContext(goal="g"))
    (request,) = asked  # asked once about the one failure, however it was answered
    (failure,) = result.failures
    assert request.trigger is CheckpointTrigger.ON_FAILURE and request.context["failure_id"] == failure.failure_id
    assert result.status is status and failure.status is failure_status
    assert [r.success for r in result.recoveries] == [retry_success]  # nothing left awaiting a verdict


async def test_the_cost_threshold_pauses_a_real_run_once() -> None:
    def costly(step: Any, observations: Any, context: LoopContext) -> str:
        context.budget.cost_used += 0.6
        return "good"

    asked, handler = _asked(HumanDecision.APPROVE)
    engine = make_engine(["a", "b", "c"], act=costly,
                         checkpoint=checkpoint(handler, trigger_cost_threshold=1.0))  # type: ignore[arg-type]
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert [(r.trigger, r.context["cost_used"]) for r in asked] == [(CheckpointTrigger.ON_COST_THRESHOLD, 1.2)]


@pytest.mark.parametrize("preset", ["disabled", "manual_only"])
async def test_presets_that_do_not_ask_about_failures_let_exhausted_recovery_fail(preset: str) -> None:
    config = getattr(CheckpointPresets, preset)()
    quiet = HumanCheckpoint(replace(config, save_checkpoints=False))
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), checkpoint=quiet)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and result.review_request is None
    assert RecoveryStrategy.HUMAN_HANDOFF not in [r.strategy for r in result.recoveries]


async def test_a_chosen_handoff_with_a_disabled_checkpoint_fails_and_says_why() -> None:
    off = HumanCheckpoint(CheckpointPresets.disabled())
    engine = engine_with(RecoveryStrategy.HUMAN_HANDOFF, {"step_2": 1}, checkpoint=off)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and result.review_request is None
    assert result.reason == "human handoff chosen, but the checkpoint is disabled"


async def test_a_handoff_review_counts_as_reviewing_its_failure() -> None:
    asked, handler = _asked(HumanDecision.APPROVE)
    engine = engine_with(
        RecoveryStrategy.HUMAN_HANDOFF, {"step_2": 1},
        checkpoint=checkpoint(handler, trigger_on_failure=True, trigger_on_major_failure=True),  # type: ignore[arg-type]
    )
    result = await engine.run(LoopContext(goal="g"))
    (failure,) = result.failures
    assert result.status is LoopStatus.COMPLETED
    assert [r.cause for r in asked] == [f"major_failure:{failure.failure_id}"]  # once, not again at the boundary


async def test_the_saved_checkpoint_record_matches_the_request_the_run_returns(tmp_path: Path) -> None:
    cp = HumanCheckpoint(CheckpointConfig(trigger_every_n_iterations=1, checkpoint_dir=str(tmp_path)))
    engine = make_engine(["a", "b"], checkpoint=cp)
    result = await engine.run(LoopContext(goal="g"), trace_id="rec-1")
    assert result.review_request is not None
    (record,) = tmp_path.glob("rec-1_checkpoint_0001.json")
    assert json.loads(record.read_text()) == result.review_request.to_dict()
    assert "- **Status:** PAUSED" in (tmp_path / "rec-1_checkpoint_0001.md").read_text()
