"""The six components of a loop (plus the optional verifier) and small ready ones.

Each Protocol method may be written sync or async; the engine awaits what
needs awaiting (``call_component``). ``REQUIRED_METHODS`` is what
``LoopEngine.register_component`` checks, so a component missing a method is
refused at registration rather than failing mid-run.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from .errors import ConfigurationError
from .types import (
    ComponentType,
    Evaluation,
    Failure,
    LoopContext,
    LoopState,
    Observation,
    Plan,
    RecoveryAction,
    Step,
    StepStatus,
)

__all__ = [
    "Planner",
    "Actor",
    "Observer",
    "Evaluator",
    "Recovery",
    "Terminator",
    "Verifier",
    "PROTOCOLS",
    "REQUIRED_METHODS",
    "call_component",
    "ListPlanner",
    "CallableActor",
    "PassThroughObserver",
    "PredicateEvaluator",
    "MaxIterationsTerminator",
]

T = TypeVar("T")


@runtime_checkable
class Planner(Protocol):
    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan | Awaitable[Plan]: ...

    def revise_plan(
        self, plan: Plan, observations: list[Observation], evaluations: list[Evaluation]
    ) -> Plan | Awaitable[Plan]: ...


@runtime_checkable
class Actor(Protocol):
    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any: ...


@runtime_checkable
class Observer(Protocol):
    def observe(self, action_result: Any, step: Step, context: LoopContext) -> Observation | Awaitable[Observation]: ...


@runtime_checkable
class Evaluator(Protocol):
    def evaluate(
        self, plan: Plan, observations: list[Observation], goal: str, context: LoopContext
    ) -> Evaluation | Awaitable[Evaluation]: ...


@runtime_checkable
class Recovery(Protocol):
    """Chooses a strategy; ``None`` means "give up on this failure"."""

    def recover(
        self, failure: Failure, state: LoopState, context: LoopContext
    ) -> RecoveryAction | None | Awaitable[RecoveryAction | None]: ...


@runtime_checkable
class Terminator(Protocol):
    def should_terminate(self, state: LoopState, goal: str, context: LoopContext) -> bool | Awaitable[bool]: ...


@runtime_checkable
class Verifier(Protocol):
    """Optional last check after evaluation (``LoopConfig.enable_verification``)."""

    def verify(self, step: Step, observations: list[Observation], context: LoopContext) -> bool | Awaitable[bool]: ...


PROTOCOLS: dict[ComponentType, type] = {
    ComponentType.PLANNER: Planner,
    ComponentType.ACTOR: Actor,
    ComponentType.OBSERVER: Observer,
    ComponentType.EVALUATOR: Evaluator,
    ComponentType.RECOVERY: Recovery,
    ComponentType.TERMINATOR: Terminator,
    ComponentType.VERIFIER: Verifier,
}

REQUIRED_METHODS: dict[ComponentType, tuple[str, ...]] = {
    ComponentType.PLANNER: ("create_plan", "revise_plan"),
    ComponentType.ACTOR: ("execute",),
    ComponentType.OBSERVER: ("observe",),
    ComponentType.EVALUATOR: ("evaluate",),
    ComponentType.RECOVERY: ("recover",),
    ComponentType.TERMINATOR: ("should_terminate",),
    ComponentType.VERIFIER: ("verify",),
}


async def call_component(method: Callable[..., Any], *args: Any) -> Any:
    """Call a component method and await the result if it is awaitable."""
    result = method(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class ListPlanner:
    """A sequential plan from step descriptions: step ``i`` depends on step ``i-1``.

    Step ids are ``step_1``, ``step_2``, ... ``revise_plan`` replaces each
    failed step by a fresh copy (id ``<old>_r<version>``, ``metadata["replaces"]``
    naming the old id) and points dependants at the copy, so they still run.
    """

    def __init__(self, descriptions: Sequence[str]) -> None:
        if isinstance(descriptions, str):
            raise TypeError("ListPlanner takes a list of step descriptions, not one string; wrap it in a list")
        self.descriptions = list(descriptions)

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        steps: list[Step] = []
        for index, description in enumerate(self.descriptions, start=1):
            deps = [steps[-1].id] if steps else []
            steps.append(Step(id=f"step_{index}", description=description, dependencies=deps))
        return Plan(goal=goal, steps=steps, context=dict(initial_context))

    def revise_plan(self, plan: Plan, observations: list[Observation], evaluations: list[Evaluation]) -> Plan:
        version = plan.version + 1
        renamed: dict[str, str] = {}
        steps: list[Step] = []
        for step in plan.steps:
            if step.is_completed() or step.status in (StepStatus.PENDING, StepStatus.READY):
                steps.append(step)
                continue
            new_id = f"{step.id}_r{version}"
            renamed[step.id] = new_id
            steps.append(
                Step(
                    id=new_id,
                    description=step.description,
                    dependencies=list(step.dependencies),
                    metadata={**step.metadata, "replaces": step.id},
                )
            )
        for step in steps:
            step.dependencies = [renamed.get(dep, dep) for dep in step.dependencies]
        return Plan(id=plan.id, goal=plan.goal, steps=steps, context=plan.context, version=version)


class CallableActor:
    """An actor from ``fn(step, observations, context)`` (sync or async)."""

    def __init__(self, fn: Callable[[Step, list[Observation], LoopContext], Any]) -> None:
        self.fn = fn

    async def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        return await call_component(self.fn, step, observations, context)


class PassThroughObserver:
    """Records the actor's output unchanged as the observation's content."""

    def observe(self, action_result: Any, step: Step, context: LoopContext) -> Observation:
        return Observation(content=action_result, source="actor", step_id=step.id)


class PredicateEvaluator:
    """Passes the latest step when ``predicate(step, output)`` is true.

    The step judged is the one the newest observation belongs to; its output
    is that observation's content.
    """

    def __init__(
        self, predicate: Callable[[Step, Any], bool], *, feedback: str = "predicate rejected the output"
    ) -> None:
        self.predicate = predicate
        self.feedback = feedback

    def evaluate(self, plan: Plan, observations: list[Observation], goal: str, context: LoopContext) -> Evaluation:
        if not observations:
            return Evaluation(score=0.0, passed=False, feedback="nothing observed yet")
        latest = observations[-1]
        step = plan.get_step(latest.step_id) if latest.step_id else None
        if step is None:
            return Evaluation(score=0.0, passed=False, feedback=f"observation names unknown step {latest.step_id!r}")
        passed = bool(self.predicate(step, latest.content))
        return Evaluation(
            score=1.0 if passed else 0.0,
            passed=passed,
            feedback="" if passed else self.feedback,
            step_id=step.id,
        )


class MaxIterationsTerminator:
    """Stops the run once ``n`` iterations have run."""

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigurationError(
                f"MaxIterationsTerminator(n={n!r}) needs a whole number n >= 1 (n=0 would stop every run "
                "before its first step)"
            )
        self.n = n

    def should_terminate(self, state: LoopState, goal: str, context: LoopContext) -> bool:
        return state.current_iteration >= self.n
