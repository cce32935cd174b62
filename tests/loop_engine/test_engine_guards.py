"""Bad data and misuse get a clear error, and a run never stays RUNNING (issue 2)."""

from __future__ import annotations

from typing import Any

import pytest

from loop_engine.components import CallableActor, ListPlanner, MaxIterationsTerminator
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.serialization import state_to_dict
from loop_engine.errors import ComponentRegistrationError, ConfigurationError, RunInterrupted
from loop_engine.types import (
    Budget,
    ComponentType,
    ExecutionState,
    FailureStatus,
    LoopContext,
    LoopState,
    LoopStatus,
    Plan,
    RecoveryStrategy,
    Step,
)

from .loops import flaky_actor, make_engine
from .test_engine import assert_legal
from .test_recovery import Always


class PlannerOf:
    def __init__(self, steps: Any) -> None:
        self.steps = steps

    def create_plan(self, goal: str, initial_context: Any) -> Plan:
        return Plan(goal=goal, steps=self.steps)

    def revise_plan(self, plan: Plan, observations: Any, evaluations: Any) -> Plan:
        return plan


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Step(id="a", status="pending")], "use a StepStatus member, e.g. StepStatus.PENDING"),  # type: ignore[arg-type]
        (["look", "fix"], "is a str, not a Step; build it as Step("),
        ([Step(id="a", dependencies=None)], "use a list of step ids"),  # type: ignore[arg-type]
        ([Step(id="")], "step ids are non-empty strings"),
        ("step_1", "steps must be a list of Step"),
    ],
)
async def test_garbage_inside_a_plan_is_a_planning_failure_that_says_what_to_do(steps: Any, message: str) -> None:
    engine = LoopEngine()
    engine.register_component(ComponentType.PLANNER, PlannerOf(steps))
    engine.register_component(ComponentType.ACTOR, CallableActor(lambda *a: "x"))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and engine.state.status is LoopStatus.FAILED
    assert message in (result.reason or "")
    assert_legal(engine)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Budget(max_steps="3"), "Budget.max_steps must be a number or None for no limit"),
        (lambda: Budget(tokens_used=-1), "Budget.tokens_used=-1 cannot be negative"),
        (lambda: LoopContext(budget={"max_steps": 3}), "LoopContext.budget must be a Budget"),
        (lambda: LoopContext(goal=None), "LoopContext.goal must be a string"),
        (lambda: LoopContext(initial_context=[1]), "LoopContext.initial_context must be a dict"),
    ],
)
def test_contexts_and_budgets_are_checked_when_built(build: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build()


async def test_a_config_or_context_changed_after_it_was_built_is_refused_at_run() -> None:
    config = LoopConfig()
    config.max_iterations = 0
    with pytest.raises(ConfigurationError, match="max_iterations=0 cannot work; use max_iterations >= 1"):
        await make_engine(config=config).run(LoopContext(goal="g"))
    context = LoopContext(goal="g")
    context.budget.max_cost = "ten"  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="Budget.max_cost must be a number"):
        await make_engine().run(context)


@pytest.mark.parametrize("n", [0, -1, "3", True])
def test_max_iterations_terminator_needs_a_positive_whole_number(n: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"needs a whole number n >= 1"):
        MaxIterationsTerminator(n)


def test_registering_a_class_instead_of_an_instance_says_so() -> None:
    with pytest.raises(ComponentRegistrationError, match=r"ListPlanner is a class; register an instance"):
        LoopEngine().register_component(ComponentType.PLANNER, ListPlanner)


class BreaksOnSave:
    """Persistence whose ``n``-th save raises: an error outside every component boundary."""

    def __init__(self, n: int) -> None:
        self.n, self.saves = n, 0

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        self.saves += 1
        if self.saves == self.n:
            raise OSError("disk full")


@pytest.mark.parametrize("n", [1, 2, 3, 5])
async def test_an_error_escaping_the_components_ends_the_run_failed_and_propagates(n: int) -> None:
    engine = make_engine(["a", "b"], persistence=BreaksOnSave(n))
    with pytest.raises(OSError, match="disk full"):
        await engine.run(LoopContext(goal="g"))
    state = engine.state
    assert state.status is LoopStatus.FAILED and state.execution_state is ExecutionState.FAILED
    assert state.stop_reason == "internal error: OSError: disk full"
    assert state.failures[-1].status is FailureStatus.TERMINAL and state.failures[-1].source_component == "engine"
    assert_legal(engine)


class ReplacingPlanner(ListPlanner):
    """Every revision replaces the failed step with a fresh one, as a real planner might."""

    def revise_plan(self, plan: Plan, observations: Any, evaluations: Any) -> Plan:
        steps = []
        for step in plan.steps:
            if step.status.value == "recovery_pending":
                step = Step(id=f"{step.id}_r", description=step.description, metadata={"replaces": step.id})
            steps.append(step)
        return Plan(id=plan.id, goal=plan.goal, steps=steps, version=plan.version + 1)


async def test_plan_revision_cannot_get_round_the_attempt_cap() -> None:
    engine = make_engine(["a", "b"], act=lambda step, *_: "good" if step.id == "step_1" else "bad",
                         config=LoopConfig(max_recovery_attempts=3))
    engine.register_component(ComponentType.PLANNER, ReplacingPlanner(["a", "b"]), allow_replace=True)
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.PLAN_REVISION))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    (failure,) = result.failures  # one problem, however many replacements it went through
    assert failure.recovery_attempts == 3 and failure.step_id == "step_2_r_r_r"
    assert result.iterations == 5  # step_1, then step_2 and its three replacements
    assert [r.success for r in result.recoveries if r.executed] == [False, False, False]


async def test_a_replacement_that_passes_recovers_the_failure() -> None:
    act = flaky_actor({"step_2": 1})
    engine = make_engine(["a", "b", "c"], act=lambda step, *a: "good" if step.id.endswith("_r") else act(step, *a))
    engine.register_component(ComponentType.PLANNER, ReplacingPlanner(["a", "b", "c"]), allow_replace=True)
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.PLAN_REVISION))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    (failure,) = result.failures
    assert failure.status is FailureStatus.RECOVERED and failure.context["replaced_by"] == "step_2_r"
    assert [r.success for r in result.recoveries] == [True]


async def test_the_circuit_breaker_holds_whatever_the_recovery_policy_says() -> None:
    config = LoopConfig(circuit_breaker_threshold=2, max_recovery_attempts=10)
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), config=config)
    engine.register_component(ComponentType.RECOVERY, Always(RecoveryStrategy.RETRY))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert [r.strategy for r in result.recoveries] == [RecoveryStrategy.RETRY, RecoveryStrategy.CIRCUIT_BREAK]
    assert result.reason == "circuit breaker opened after 2 consecutive failures"


async def test_component_calls_are_counted_in_the_state() -> None:
    engine = make_engine(["a", "b"], act=flaky_actor({"step_2": 1}))
    engine.register_component(ComponentType.TERMINATOR, MaxIterationsTerminator(10))
    await engine.run(LoopContext(goal="g"))
    assert engine.state.counters == {"planner": 1, "actor": 3, "evaluator": 3, "recovery": 1, "terminator": 4}


class StopsOnce:
    """Persistence that asks the run to stop right after its ``n``-th save, as a shutting-down service does."""

    def __init__(self, n: int) -> None:
        self.n, self.saves = n, 0

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        self.saves += 1
        if self.saves == self.n:
            raise RunInterrupted("shutting down")


async def test_run_interrupted_from_a_save_stops_without_failing_and_resume_goes_on() -> None:
    engine = make_engine(["a", "b"], persistence=StopsOnce(3))
    with pytest.raises(RunInterrupted):
        await engine.run(LoopContext(goal="g"))
    state = engine.state
    assert state.status is LoopStatus.RUNNING and not state.failures  # stopped in place, not ended
    result = await make_engine(["a", "b"]).resume(state)
    assert result.status is LoopStatus.COMPLETED and not result.failures


async def test_with_persistence_a_non_json_output_is_a_recoverable_failure_naming_the_step() -> None:
    calls: list[str] = []

    def act(step: Step, *_: Any) -> Any:
        calls.append(step.id)
        return object() if calls.count(step.id) == 1 and step.id == "step_2" else "good"

    saved: list[dict[str, Any]] = []

    class Json:
        def save(self, state: LoopState, trace_id: str | None = None) -> None:
            saved.append(state_to_dict(state))  # raises if anything in the state is not JSON

    engine = make_engine(["a", "b"], act=act, persistence=Json())
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED and calls == ["step_1", "step_2", "step_2"]
    (failure,) = result.failures
    assert failure.type.name == "INVALID_OUTPUT" and failure.status is FailureStatus.RECOVERED
    assert failure.message.startswith("actor failed: step 'step_2' output: ") and "object" in failure.message
    assert saved[-1]["execution_state"] == "COMPLETED"
