"""Builders shared by the engine tests: small deterministic loops and fakes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import CallableActor, ListPlanner, PredicateEvaluator
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.review import HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import ComponentType, LoopState

__all__ = [
    "FakeSleep",
    "FakeClock",
    "RecordingPersistence",
    "flaky_actor",
    "make_engine",
    "checkpoint",
    "decide",
]


class FakeSleep:
    """Records requested delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class FakeClock:
    def __init__(self, step: float = 1.0) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class RecordingPersistence:
    """Anything with save(state, trace_id=...); keeps the execution state of each save."""

    def __init__(self) -> None:
        self.saves: list[tuple[str | None, str]] = []

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        self.saves.append((trace_id, state.execution_state.value))


def flaky_actor(bad: dict[str, int]) -> Callable[..., Any]:
    """Returns "bad" for the first ``bad[step_id]`` attempts of a step, else "good".

    Decided by ``step.attempts`` (part of the saved state), so a resumed run in
    a fresh engine behaves as the uninterrupted one would.
    """
    calls: dict[str, int] = {}

    def act(step: Any, observations: Any, context: Any) -> str:
        calls[step.id] = calls.get(step.id, 0) + 1
        return "bad" if step.attempts <= bad.get(step.id, 0) else "good"

    act.calls = calls  # type: ignore[attr-defined]
    return act


def make_engine(
    steps: list[str] | None = None,
    act: Callable[..., Any] | None = None,
    *,
    config: LoopConfig | None = None,
    evaluate: bool = True,
    **engine_kwargs: Any,
) -> LoopEngine:
    engine = LoopEngine(config, **engine_kwargs)
    engine.register_component(ComponentType.PLANNER, ListPlanner(steps or ["a", "b", "c"]))
    engine.register_component(ComponentType.ACTOR, CallableActor(act or flaky_actor({})))
    if evaluate:
        engine.register_component(ComponentType.EVALUATOR, PredicateEvaluator(lambda step, out: out == "good"))
    return engine


def checkpoint(handler: Callable[[ReviewRequest], ReviewResponse] | None = None, **config: Any) -> HumanCheckpoint:
    config.setdefault("save_checkpoints", False)
    return HumanCheckpoint(CheckpointConfig(**config), decision_handler=handler)


def decide(decision: HumanDecision, **kwargs: Any) -> Callable[[ReviewRequest], ReviewResponse]:
    """A decision handler that always answers ``decision``."""

    def handler(request: ReviewRequest) -> ReviewResponse:
        return ReviewResponse(checkpoint_id=request.checkpoint_id, decision=decision, **kwargs)

    return handler
