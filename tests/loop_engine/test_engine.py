"""The engine's main loop: iteration counting, verdicts, limits, components' misbehaviour."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from loop_engine.components import CallableActor, MaxIterationsTerminator
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.errors import ConfigurationError
from loop_engine.state_machine import TRANSITIONS, derive_result_status
from loop_engine.types import (
    Budget,
    ComponentType,
    ExecutionState,
    FailureStatus,
    FailureType,
    LoopContext,
    LoopStatus,
    Plan,
    RecoveryAction,
    Step,
    StepStatus,
)

from .loops import FakeClock, RecordingPersistence, flaky_actor, make_engine


def assert_legal(engine: LoopEngine) -> None:
    """Every move is in the table and starts where the previous one ended; the last ends where the run is."""
    where = ExecutionState.INITIALIZED.value
    for a, b in engine.state.transitions:
        assert a == where, (where, a, b)
        assert ExecutionState(b) in TRANSITIONS[ExecutionState(a)], (a, b)
        where = b
    assert where == engine.state.execution_state.value


async def test_tutorial_one_terminator_stops_after_one_iteration() -> None:
    engine = make_engine(["a", "b", "c"], evaluate=False)
    engine.register_component(ComponentType.TERMINATOR, MaxIterationsTerminator(1))
    result = await engine.run(LoopContext(goal="demo"))
    assert engine.state.current_iteration == 1
    assert engine.state.status is LoopStatus.TERMINATED
    assert engine.state.execution_state is ExecutionState.POLICY_TERMINATED
    assert result.status is LoopStatus.COMPLETED and result.iterations == 1
    assert engine.state.stop_reason == "terminator fired"


async def test_plan_completing_on_the_last_allowed_iteration_is_completed() -> None:
    engine = make_engine(["a", "b", "c"], config=LoopConfig(max_iterations=3))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert engine.state.execution_state is ExecutionState.COMPLETED
    assert engine.state.status is LoopStatus.COMPLETED and result.iterations == 3
    assert result.output == {"step_1": "good", "step_2": "good", "step_3": "good"}
    assert_legal(engine)


async def test_max_iterations_stops_terminated_with_reason() -> None:
    engine = make_engine(["a", "b", "c"], config=LoopConfig(max_iterations=2))
    result = await engine.run(LoopContext(goal="g"))
    assert engine.state.status is LoopStatus.TERMINATED
    assert engine.state.execution_state is ExecutionState.BUDGET_EXHAUSTED
    assert "max iterations" in (engine.state.stop_reason or "")
    assert result.status is LoopStatus.FAILED and result.reason == engine.state.stop_reason
    assert engine.state.current_iteration == 2


async def test_budget_counts_actor_calls_and_clock_time() -> None:
    engine = make_engine(["a", "b", "c"], clock=FakeClock(step=0.5))
    context = LoopContext(goal="g", budget=Budget(max_steps=2))
    result = await engine.run(context)
    assert context.budget.steps_used == 2
    assert engine.state.stop_reason == "budget exhausted: steps used 2 of 2"
    assert result.status is LoopStatus.FAILED and engine.state.status is LoopStatus.TERMINATED
    assert context.budget.time_used > 0 and result.execution_time == context.budget.time_used


async def test_without_planner_the_goal_is_a_one_step_plan() -> None:
    engine = LoopEngine()
    engine.register_component(ComponentType.ACTOR, CallableActor(lambda step, obs, ctx: step.description))
    result = await engine.run(LoopContext(goal="say hi"))
    assert result.status is LoopStatus.COMPLETED
    assert result.output == {"step_1": "say hi"}


async def test_without_evaluator_executed_steps_pass() -> None:
    engine = make_engine(["a", "b"], act=lambda *a: "anything", evaluate=False)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert all(s.status is StepStatus.VERIFIED_COMPLETED for s in result.plan.steps)


async def test_verification_enabled_without_verifier_still_completes() -> None:
    engine = make_engine(["a"], config=LoopConfig(enable_verification=True))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and result.verification_status is None


class Verifier:
    def __init__(self, verdicts: list[bool]) -> None:
        self.verdicts = verdicts

    async def verify(self, step: Step, observations: Any, context: LoopContext) -> bool:
        return self.verdicts.pop(0)


async def test_a_registered_verifier_can_reject_and_the_retry_passes() -> None:
    engine = make_engine(["a"], config=LoopConfig(enable_verification=True))
    engine.register_component(ComponentType.VERIFIER, Verifier([False, True]))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and result.verification_status is True
    assert [f.type for f in result.failures] == [FailureType.VERIFICATION_FAILED]
    assert ("evaluating", "verifying") in engine.state.transitions


async def test_persistence_saves_every_boundary_and_the_stop_under_the_trace_id() -> None:
    sink = RecordingPersistence()
    engine = make_engine(["a", "b"], persistence=sink)
    await engine.run(LoopContext(goal="g"), trace_id="t-1")
    assert {trace for trace, _ in sink.saves} == {"t-1"}
    states = [s for _, s in sink.saves]
    assert states.count("iteration_complete") == 2 and states.count("acting") == 2
    assert states[0] == "planning" and states[-1] == "completed"


async def test_default_trace_id_is_unique_and_timestamped() -> None:
    ids = set()
    for _ in range(3):
        engine = make_engine(["a"])
        result = await engine.run(LoopContext(goal="g"))
        assert re.fullmatch(r"run-\d{8}-\d{6}-[0-9a-f]{12}", result.trace_id or "")
        assert engine.state.trace_id == result.trace_id
        ids.add(result.trace_id)
    assert len(ids) == 3


async def test_run_without_actor_says_how_to_register_one() -> None:
    with pytest.raises(ConfigurationError, match=r"register_component\(ComponentType.ACTOR"):
        await LoopEngine().run(LoopContext(goal="g"))


class BadPlanner:
    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def create_plan(self, goal: str, initial_context: Any) -> Any:
        if isinstance(self.plan, Exception):
            raise self.plan
        return self.plan

    def revise_plan(self, plan: Plan, observations: Any, evaluations: Any) -> Plan:
        return plan


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (Plan(steps=[Step(id="a", dependencies=["ghost"])]), "unknown step id"),
        (RuntimeError("planner down"), "planner down"),
        ("not a plan", "must return a Plan"),
        (Plan(steps=[]), "no steps"),
    ],
)
async def test_planning_problems_end_failed_with_a_recorded_failure(plan: Any, message: str) -> None:
    engine = LoopEngine()
    engine.register_component(ComponentType.PLANNER, BadPlanner(plan))
    engine.register_component(ComponentType.ACTOR, CallableActor(lambda *a: "x"))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and engine.state.status is LoopStatus.FAILED
    assert message in (result.reason or "")
    assert result.failures[-1].type is FailureType.PLANNING_FAILURE
    assert result.failures[-1].status is FailureStatus.TERMINAL
    assert_legal(engine)


class Garbage:
    def observe(self, *args: Any) -> Any:
        return 42

    def evaluate(self, *args: Any) -> Any:
        return "yes"

    def should_terminate(self, *args: Any) -> Any:
        return "maybe"


@pytest.mark.parametrize("kind", [ComponentType.OBSERVER, ComponentType.EVALUATOR, ComponentType.TERMINATOR])
async def test_garbage_from_a_component_is_a_failure_not_a_crash(kind: ComponentType) -> None:
    engine = make_engine(["a"], evaluate=False, config=LoopConfig(max_recovery_attempts=1))
    engine.register_component(kind, Garbage())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert result.failures and result.failures[0].source_component == kind.value
    assert derive_result_status(engine.state) is result.status
    assert_legal(engine)


async def test_actor_exception_is_recorded_and_retried_on_the_same_failure() -> None:
    calls: list[str] = []

    def act(step: Step, obs: Any, ctx: Any) -> str:
        calls.append(step.id)
        if len(calls) < 3:
            raise ValueError("flaky tool")
        return "good"

    engine = make_engine(["a"], act=act)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    [failure] = result.failures
    assert failure.recovery_attempts == 2 and failure.status is FailureStatus.RECOVERED
    assert "ValueError: flaky tool" in failure.message
    assert [r.success for r in result.recoveries] == [False, True]
    assert result.plan.steps[0].attempts == 3


async def test_retry_exhaustion_without_checkpoint_fails_the_run() -> None:
    engine = make_engine(["a", "b"], act=flaky_actor({"step_1": 99}), config=LoopConfig(max_recovery_attempts=2))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and engine.state.status is LoopStatus.FAILED
    [failure] = result.failures
    assert failure.status is FailureStatus.TERMINAL and failure.recovery_attempts == 2
    assert result.plan.steps[0].status is StepStatus.FAILED and result.plan.steps[1].status is StepStatus.PENDING
    assert "exhausted" in (result.reason or "")


async def test_engine_state_is_never_running_after_run() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}))
    await engine.run(LoopContext(goal="g"))
    assert engine.state.status is not LoopStatus.RUNNING


@pytest.mark.parametrize(("verbose", "level"), [(True, logging.INFO), (False, logging.DEBUG)])
async def test_verbose_logs_every_transition_at_info(
    verbose: bool, level: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="loop_engine.engine")
    engine = make_engine(["a"], config=LoopConfig(verbose=verbose))
    await engine.run(LoopContext(goal="g"), trace_id="v-1")
    moves = [r for r in caplog.records if r.name == "loop_engine.engine"]
    assert [r.getMessage() for r in moves] == [f"run v-1: {a} -> {b}" for a, b in engine.state.transitions]
    assert {r.levelno for r in moves} == {level}


class StringStrategy:
    def recover(self, failure: Any, state: Any, context: Any) -> Any:
        return RecoveryAction(strategy="retry")  # type: ignore[arg-type]


async def test_a_strategy_given_as_a_string_is_named_in_the_failure_reason() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 1}))
    engine.register_component(ComponentType.RECOVERY, StringStrategy())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert "strategy 'retry'" in (result.reason or "") and "RecoveryStrategy.RETRY" in (result.reason or "")


async def test_a_raising_terminator_is_reported_as_raising() -> None:
    class Broken:
        def should_terminate(self, *args: Any) -> bool:
            raise KeyError("budget")

    engine = make_engine(["a"])
    engine.register_component(ComponentType.TERMINATOR, Broken())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert result.failures[0].message == "terminator raised KeyError: 'budget'"


async def test_a_second_concurrent_run_on_one_engine_is_refused() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def act(step: Step, obs: Any, ctx: Any) -> str:
        started.set()
        await release.wait()
        return "good"

    engine = make_engine(["a"], act=act)
    first = asyncio.create_task(engine.run(LoopContext(goal="g"), trace_id="first"))
    await started.wait()
    with pytest.raises(RuntimeError, match="still driving run 'first'.*one LoopEngine per concurrent run"):
        await engine.run(LoopContext(goal="g"))
    release.set()
    assert (await first).status is LoopStatus.COMPLETED
    assert (await engine.run(LoopContext(goal="g"))).status is LoopStatus.COMPLETED  # free again
