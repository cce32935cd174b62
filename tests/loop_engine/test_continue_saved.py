"""``LoopEngine.continue_saved``: a saved run picked up wherever it stopped; one that waits or ended runs no step."""

from __future__ import annotations

from typing import Any


from loop_engine.review import HumanDecision
from loop_engine.types import ExecutionState, LoopStatus

from .loops import RecordingPersistence, make_engine
from .test_resume import answer, decided_then_killed, failing_engine, paused_at_failure, round_trip


async def test_a_pause_still_waiting_for_its_answer_is_answered_from_the_snapshot_without_a_step() -> None:
    state = await paused_at_failure()
    calls: list[str] = []
    saves = RecordingPersistence()

    def act(step: Any, observations: Any, context: Any) -> str:
        calls.append(step.id)
        return "good"

    engine = make_engine(["a", "b", "c"], act=act, persistence=saves)
    result = await engine.continue_saved(state)
    assert result.status is LoopStatus.PAUSED
    assert result.review_request is not None and result.review_request.checkpoint_id == "checkpoint_0001"
    assert calls == [] and saves.saves == []  # nothing ran, nothing was written
    assert engine.state is state and state.pending_review is not None


async def test_an_answer_is_applied_and_a_finished_run_is_reported_as_it_ended() -> None:
    state = await paused_at_failure()
    engine = failing_engine()
    result = await engine.continue_saved(state, answer(state, HumanDecision.APPROVE, reviewer="bob"))
    assert result.status is LoopStatus.COMPLETED and engine.state is state

    ended = round_trip(engine.state)
    again = make_engine(["a", "b", "c"])
    report = await again.continue_saved(ended)
    assert report.status is LoopStatus.COMPLETED and report.iterations == result.iterations
    assert report.execution_state is ExecutionState.COMPLETED and again.state is ended


async def test_a_decision_saved_but_not_applied_is_applied_once() -> None:
    """The process died right after the decision was saved: no review is pending, the decision is the engine's."""
    decided = await decided_then_killed()
    assert decided.pending_review is None
    result = await failing_engine().continue_saved(decided)
    assert result.status is LoopStatus.COMPLETED and len(decided.decisions) == 1
