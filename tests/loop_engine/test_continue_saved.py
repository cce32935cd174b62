"""``LoopEngine.continue_saved``: a saved run picked up wherever it stopped; one that waits or ended runs no step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from loop_engine.components import CallableActor
from loop_engine.review import HumanDecision
from loop_engine.serialization import state_from_dict, state_to_dict
from loop_engine.types import ComponentType, ExecutionState, LoopState, LoopStatus

from .loops import RecordingPersistence, make_engine
from .test_resume import answer, failing_engine, paused_at_failure, round_trip


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
    state = await paused_at_failure()
    snapshots: list[dict[str, Any]] = []

    class Snapshot(RecordingPersistence):
        def save(self, s: LoopState, trace_id: str | None = None) -> None:
            snapshots.append(json.loads(json.dumps(state_to_dict(s))))

    class Crash(BaseException):
        """Stands in for SIGKILL right after the decision was saved."""

    def crash(step: Any, observations: Any, context: Any) -> str:
        raise Crash()

    engine = failing_engine(persistence=Snapshot())
    engine.register_component(ComponentType.ACTOR, CallableActor(crash), allow_replace=True)
    with pytest.raises(Crash):
        await engine.resume(state, answer(state, HumanDecision.APPROVE, reviewer="carol"))
    decided = state_from_dict(next(s for s in snapshots if s["decisions"]))
    assert decided.pending_review is None
    result = await failing_engine().continue_saved(decided)
    assert result.status is LoopStatus.COMPLETED and len(decided.decisions) == 1
