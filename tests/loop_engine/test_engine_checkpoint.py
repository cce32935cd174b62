"""Checkpoints inside the engine: pause at boundaries and before terminal failures."""

from __future__ import annotations

import pytest

from loop_engine.components import ListPlanner
from loop_engine.review import CheckpointTrigger, HumanDecision
from loop_engine.types import ComponentType, ExecutionState, FailureStatus, LoopContext, LoopStatus, RecoveryStrategy

from .loops import RecordingPersistence, checkpoint, decide, flaky_actor, make_engine


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
