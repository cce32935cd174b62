"""Every edge of the transition table, taken by a real engine run.

Each scenario below is a small loop built to take the edges it names; a
test checks that it does, and another that the scenarios together take
every edge of ``TRANSITIONS`` - so an edge added to the table without a
run that reaches it (or a scenario that silently stops reaching its edge)
turns this red.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from loop_engine.components import ListPlanner, MaxIterationsTerminator
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.review import HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.state_machine import TRANSITIONS
from loop_engine.types import (
    Budget,
    ComponentType,
    ExecutionState,
    LoopContext,
    LoopState,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    Step,
    StepStatus,
)

from .loops import checkpoint, decide, flaky_actor, make_engine

S = ExecutionState
Edge = tuple[S, S]
Scenario = Callable[[], Awaitable[LoopState]]

TABLE_EDGES: set[Edge] = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}


async def run(engine: LoopEngine, budget: Budget | None = None) -> LoopState:
    await engine.run(LoopContext(goal="g", budget=budget or Budget()))
    return engine.state


class FixedPlanner(ListPlanner):
    """Returns ``plan`` from create_plan; revise_plan raises ``revise_error`` if set."""

    def __init__(self, plan: Plan | Exception, revise_error: Exception | None = None) -> None:
        super().__init__(["a"])
        self.plan, self.revise_error = plan, revise_error

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        if isinstance(self.plan, Exception):
            raise self.plan
        return self.plan

    def revise_plan(self, plan: Plan, observations: Any, evaluations: Any) -> Plan:
        if self.revise_error is not None:
            raise self.revise_error
        return super().revise_plan(plan, observations, evaluations)


class FlakyPlanner(ListPlanner):
    """Fails its first ``failures`` create_plan calls."""

    def __init__(self, failures: int) -> None:
        super().__init__(["a"])
        self.failures = failures

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("planner down")
        return super().create_plan(goal, initial_context)


class Always:
    def __init__(self, strategy: RecoveryStrategy) -> None:
        self.strategy = strategy

    def recover(self, failure: Any, state: Any, context: Any) -> RecoveryAction:
        return RecoveryAction(strategy=self.strategy)


class Scripted:
    """A component answering from a script, then repeating its last answer."""

    def __init__(self, *answers: Any) -> None:
        self.answers = itertools.chain(answers, itertools.repeat(answers[-1]))

    def _next(self) -> Any:
        answer = next(self.answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def should_terminate(self, state: Any, goal: str, context: Any) -> Any:
        return self._next()

    def verify(self, step: Any, observations: Any, context: Any) -> Any:
        return self._next()

    def observe(self, result: Any, step: Any, context: Any) -> Any:
        return self._next()

    def recover(self, failure: Any, state: Any, context: Any) -> Any:
        return self._next()


def done_plan(*statuses: StepStatus) -> Plan:
    return Plan(steps=[Step(id=f"s{i}", status=status) for i, status in enumerate(statuses)])


def approve(request: ReviewRequest) -> ReviewResponse:
    return ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.APPROVE)


# --- scenarios: name -> (edges it must take, the run) ------------------------------------


async def straight() -> LoopState:
    return await run(make_engine(["a", "b"]))


async def planner_returns_finished_plan() -> LoopState:
    engine = make_engine()
    engine.register_component(
        ComponentType.PLANNER, FixedPlanner(done_plan(StepStatus.VERIFIED_COMPLETED)), allow_replace=True
    )
    return await run(engine)


async def planner_returns_finished_plan_with_skip() -> LoopState:
    plan = done_plan(StepStatus.VERIFIED_COMPLETED, StepStatus.SKIPPED)
    engine = make_engine()
    engine.register_component(ComponentType.PLANNER, FixedPlanner(plan), allow_replace=True)
    return await run(engine)


class StopAtOnce:
    def should_terminate(self, state: LoopState, goal: str, context: LoopContext) -> bool:
        return True


async def terminator_fires_before_any_iteration() -> LoopState:
    engine = make_engine()
    engine.register_component(ComponentType.TERMINATOR, StopAtOnce())
    return await run(engine)


async def budget_spent_before_any_iteration() -> LoopState:
    return await run(make_engine(), Budget(max_steps=0))


async def planner_raises() -> LoopState:
    engine = make_engine()
    engine.register_component(ComponentType.PLANNER, FixedPlanner(RuntimeError("down")), allow_replace=True)
    return await run(engine)


async def external_review_before_the_first_step() -> LoopState:
    cp = checkpoint()
    cp.request_review("look first")
    return await run(make_engine(checkpoint=cp))


async def actor_raises_then_retry_passes() -> LoopState:
    calls: list[int] = []

    def act(step: Any, observations: Any, context: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("tool failed")
        return "good"

    return await run(make_engine(["a"], act=act))


async def crash_mid_iteration_then_resume() -> LoopState:
    class Killed(BaseException):
        pass

    calls: list[str] = []

    def act(step: Any, observations: Any, context: Any) -> str:
        calls.append(step.id)
        if len(calls) == 1:
            raise Killed()
        return "good"

    engine = make_engine(["a"], act=act)
    with pytest.raises(Killed):
        await engine.run(LoopContext(goal="g"))
    await make_engine(["a"], act=act).resume(engine.state)
    return engine.state


async def no_evaluator_with_verifier() -> LoopState:
    engine = make_engine(["a"], evaluate=False, config=LoopConfig(enable_verification=True))
    engine.register_component(ComponentType.VERIFIER, Scripted(True))
    return await run(engine)


async def observer_raises() -> LoopState:
    engine = make_engine(["a"], config=LoopConfig(max_recovery_attempts=1))
    engine.register_component(ComponentType.OBSERVER, Scripted(ValueError("observer broke")))
    return await run(engine)


async def no_evaluator() -> LoopState:
    return await run(make_engine(["a"], evaluate=False))


async def verifier_rejects_then_passes() -> LoopState:
    engine = make_engine(["a"], config=LoopConfig(enable_verification=True))
    engine.register_component(ComponentType.VERIFIER, Scripted(False, True))
    return await run(engine)


async def evaluator_rejects_until_exhausted() -> LoopState:
    return await run(make_engine(["a"], act=flaky_actor({"step_1": 99}), config=LoopConfig(max_recovery_attempts=1)))


async def graceful_degradation() -> LoopState:
    engine = make_engine(["a", "b"], act=flaky_actor({"step_1": 1}))
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.GRACEFUL_DEGRADATION))
    return await run(engine)


async def terminator_fires_after_one_iteration() -> LoopState:
    engine = make_engine()
    engine.register_component(ComponentType.TERMINATOR, MaxIterationsTerminator(1))
    return await run(engine)


async def max_iterations_reached() -> LoopState:
    return await run(make_engine(["a", "b"], config=LoopConfig(max_iterations=1)))


async def terminator_returns_garbage_after_one_iteration() -> LoopState:
    engine = make_engine()
    engine.register_component(ComponentType.TERMINATOR, Scripted(False, "maybe"))
    return await run(engine)


async def boundary_pause() -> LoopState:
    return await run(make_engine(checkpoint=checkpoint(trigger_every_n_iterations=1)))


async def plan_revision() -> LoopState:
    engine = make_engine(["a", "b"], act=flaky_actor({"step_1": 1}))
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.PLAN_REVISION))
    return await run(engine)


async def human_handoff() -> LoopState:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 1}))
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.HUMAN_HANDOFF))
    return await run(engine)


def revision_breaks(**engine_kwargs: Any) -> LoopEngine:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 1}), **engine_kwargs)
    plan = ListPlanner(["a"]).create_plan("g", {})
    engine.register_component(
        ComponentType.PLANNER, FixedPlanner(plan, revise_error=RuntimeError("cannot revise")), allow_replace=True
    )
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.PLAN_REVISION))
    return engine


async def revision_raises_and_a_human_is_asked() -> LoopState:
    return await run(revision_breaks(checkpoint=checkpoint()))


async def revision_raises() -> LoopState:
    return await run(revision_breaks())


async def approved_at_every_boundary() -> LoopState:
    return await run(make_engine(["a", "b"], checkpoint=checkpoint(approve, trigger_every_n_iterations=1)))


async def approved_when_plan_complete() -> LoopState:
    return await run(make_engine(["a"], checkpoint=checkpoint(approve, trigger_on_plan_complete=True)))


async def reviewer_skips_the_failed_step() -> LoopState:
    handler = decide(HumanDecision.MODIFY, modifications={"plan": {"skip": ["step_1"]}})
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), checkpoint=checkpoint(handler))
    engine.register_component(ComponentType.RECOVERY, Scripted(None))
    return await run(engine)


async def terminator_fires_after_approval() -> LoopState:
    engine = make_engine(checkpoint=checkpoint(approve, trigger_every_n_iterations=1))
    engine.register_component(ComponentType.TERMINATOR, MaxIterationsTerminator(1))
    return await run(engine)


async def max_iterations_after_approval() -> LoopState:
    engine = make_engine(
        ["a", "b"], checkpoint=checkpoint(approve, trigger_every_n_iterations=1), config=LoopConfig(max_iterations=1)
    )
    return await run(engine)


async def reviewer_rejects() -> LoopState:
    reject = checkpoint(decide(HumanDecision.REJECT), trigger_every_n_iterations=1)
    return await run(make_engine(["a"], checkpoint=reject))


async def failure_right_after_approval_asks_again() -> LoopState:
    engine = make_engine(checkpoint=checkpoint(approve, trigger_every_n_iterations=1))
    engine.register_component(ComponentType.TERMINATOR, Scripted(False, "maybe", False))
    return await run(engine)


async def planning_fails_human_lets_it_plan_again() -> LoopState:
    engine = make_engine(["a"], checkpoint=checkpoint(approve))
    engine.register_component(ComponentType.PLANNER, FlakyPlanner(failures=1), allow_replace=True)
    return await run(engine)


SCENARIOS: dict[str, tuple[set[Edge], Scenario]] = {
    "straight": ({(S.INITIALIZED, S.PLANNING), (S.PLANNING, S.ACTING), (S.ACTING, S.OBSERVING),
                  (S.OBSERVING, S.EVALUATING), (S.EVALUATING, S.ITERATION_COMPLETE),
                  (S.ITERATION_COMPLETE, S.ACTING), (S.ITERATION_COMPLETE, S.COMPLETED)}, straight),
    "finished plan": ({(S.PLANNING, S.COMPLETED)}, planner_returns_finished_plan),
    "finished plan with skip": ({(S.PLANNING, S.PARTIALLY_COMPLETED)}, planner_returns_finished_plan_with_skip),
    "terminator at 0": ({(S.PLANNING, S.POLICY_TERMINATED)}, terminator_fires_before_any_iteration),
    "budget at 0": ({(S.PLANNING, S.BUDGET_EXHAUSTED)}, budget_spent_before_any_iteration),
    "planner raises": ({(S.PLANNING, S.FAILED)}, planner_raises),
    "external review": ({(S.PLANNING, S.WAITING_FOR_HUMAN)}, external_review_before_the_first_step),
    "actor raises": ({(S.ACTING, S.RECOVERING), (S.RECOVERING, S.ITERATION_COMPLETE)}, actor_raises_then_retry_passes),
    "crash and resume": ({(S.ACTING, S.ITERATION_COMPLETE)}, crash_mid_iteration_then_resume),
    "verifier only": ({(S.OBSERVING, S.VERIFYING), (S.VERIFYING, S.ITERATION_COMPLETE)}, no_evaluator_with_verifier),
    "observer raises": ({(S.OBSERVING, S.RECOVERING)}, observer_raises),
    "no evaluator": ({(S.OBSERVING, S.ITERATION_COMPLETE)}, no_evaluator),
    "verifier rejects": ({(S.EVALUATING, S.VERIFYING), (S.VERIFYING, S.RECOVERING)}, verifier_rejects_then_passes),
    "evaluator rejects": ({(S.EVALUATING, S.RECOVERING), (S.RECOVERING, S.FAILED)}, evaluator_rejects_until_exhausted),
    "degradation": ({(S.ITERATION_COMPLETE, S.PARTIALLY_COMPLETED)}, graceful_degradation),
    "terminator at 1": ({(S.ITERATION_COMPLETE, S.POLICY_TERMINATED)}, terminator_fires_after_one_iteration),
    "max iterations": ({(S.ITERATION_COMPLETE, S.BUDGET_EXHAUSTED)}, max_iterations_reached),
    "terminator garbage": ({(S.ITERATION_COMPLETE, S.FAILED)}, terminator_returns_garbage_after_one_iteration),
    "boundary pause": ({(S.ITERATION_COMPLETE, S.WAITING_FOR_HUMAN)}, boundary_pause),
    "plan revision": ({(S.RECOVERING, S.REPLANNING), (S.REPLANNING, S.ITERATION_COMPLETE)}, plan_revision),
    "human handoff": ({(S.RECOVERING, S.WAITING_FOR_HUMAN)}, human_handoff),
    "revision raises, human": ({(S.REPLANNING, S.WAITING_FOR_HUMAN)}, revision_raises_and_a_human_is_asked),
    "revision raises": ({(S.REPLANNING, S.FAILED)}, revision_raises),
    "approved boundaries": ({(S.WAITING_FOR_HUMAN, S.ACTING)}, approved_at_every_boundary),
    "approved completion": ({(S.WAITING_FOR_HUMAN, S.COMPLETED)}, approved_when_plan_complete),
    "reviewer skips": ({(S.WAITING_FOR_HUMAN, S.PARTIALLY_COMPLETED)}, reviewer_skips_the_failed_step),
    "terminator after approval": ({(S.WAITING_FOR_HUMAN, S.POLICY_TERMINATED)}, terminator_fires_after_approval),
    "limit after approval": ({(S.WAITING_FOR_HUMAN, S.BUDGET_EXHAUSTED)}, max_iterations_after_approval),
    "reviewer rejects": ({(S.WAITING_FOR_HUMAN, S.FAILED)}, reviewer_rejects),
    "asks again": ({(S.WAITING_FOR_HUMAN, S.WAITING_FOR_HUMAN)}, failure_right_after_approval_asks_again),
    "plan again": ({(S.WAITING_FOR_HUMAN, S.PLANNING)}, planning_fails_human_lets_it_plan_again),
}


def edges_of(state: LoopState) -> set[Edge]:
    return {(S(a), S(b)) for a, b in state.transitions}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario_takes_its_edges(name: str) -> None:
    wanted, scenario = SCENARIOS[name]
    state = await scenario()
    taken = edges_of(state)
    assert taken <= TABLE_EDGES
    assert wanted <= taken, f"{name} missed {wanted - taken}; it took {state.transitions}"
    assert state.execution_state.is_terminal or state.execution_state is S.WAITING_FOR_HUMAN


def test_the_scenarios_cover_every_edge_of_the_table() -> None:
    claimed = set().union(*(edges for edges, _ in SCENARIOS.values()))
    missing = sorted((a.value, b.value) for a, b in TABLE_EDGES - claimed)
    assert not missing, f"table edges no scenario takes: {missing}"
    assert claimed <= TABLE_EDGES
