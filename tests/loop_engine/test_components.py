"""Registration refusals, LoopConfig validation, plan validation and the ready components."""

from __future__ import annotations

from typing import Any

import pytest

from loop_engine.components import (
    CallableActor,
    ListPlanner,
    MaxIterationsTerminator,
    PassThroughObserver,
    PredicateEvaluator,
    call_component,
)
from loop_engine.config import LoopConfig
from loop_engine.core import LoopConfig as CoreConfig
from loop_engine.core import LoopEngine as CoreEngine
from loop_engine.engine import LoopEngine
from loop_engine.errors import ComponentRegistrationError, ConfigurationError, PlanValidationError
from loop_engine.types import ComponentType, LoopContext, LoopState, Observation, Plan, Step, StepStatus


class NoRevise:
    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        return Plan()


def test_string_key_is_refused_with_the_enum_to_use() -> None:
    with pytest.raises(ComponentRegistrationError, match=r"use ComponentType\.PLANNER"):
        LoopEngine().register_component("planner", ListPlanner(["a"]))  # type: ignore[arg-type]


def test_duplicate_is_refused_unless_replacing() -> None:
    engine = LoopEngine()
    engine.register_component(ComponentType.ACTOR, CallableActor(lambda *a: 1))
    with pytest.raises(ComponentRegistrationError, match="allow_replace=True"):
        engine.register_component(ComponentType.ACTOR, CallableActor(lambda *a: 2))
    engine.register_component(ComponentType.ACTOR, CallableActor(lambda *a: 2), allow_replace=True)


def test_missing_method_names_method_and_protocol() -> None:
    with pytest.raises(ComponentRegistrationError, match=r"revise_plan\(\).*Planner protocol"):
        LoopEngine().register_component(ComponentType.PLANNER, NoRevise())


@pytest.mark.parametrize("value", [0, -3])
def test_max_iterations_below_one_is_refused(value: int) -> None:
    with pytest.raises(ConfigurationError, match="max_iterations >= 1"):
        LoopConfig(max_iterations=value)


def test_other_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigurationError, match="backoff_jitter"):
        LoopConfig(backoff_jitter=2)
    with pytest.raises(ConfigurationError, match="circuit_breaker_threshold"):
        LoopConfig(circuit_breaker_threshold=0)
    with pytest.raises(ConfigurationError, match=r"max_iterations must be a whole number \(int\), got 2.5"):
        LoopConfig(max_iterations=2.5)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="verbose must be True or False"):
        LoopConfig(verbose=1)  # type: ignore[arg-type]


def test_unknown_dependency_ids_are_refused_with_known_ids() -> None:
    plan = Plan(steps=[Step(id="a"), Step(id="b", dependencies=["a", "zzz"])])
    with pytest.raises(PlanValidationError, match=r"unknown step id\(s\) \['zzz'\].*known ids are \['a', 'b'\]"):
        plan.validate()


def test_core_reexports_the_engine() -> None:
    assert CoreEngine is LoopEngine and CoreConfig is LoopConfig


def test_list_planner_makes_a_sequential_plan() -> None:
    plan = ListPlanner(["x", "y", "z"]).create_plan("goal", {"k": 1})
    assert [s.id for s in plan.steps] == ["step_1", "step_2", "step_3"]
    assert [s.dependencies for s in plan.steps] == [[], ["step_1"], ["step_2"]]
    assert plan.goal == "goal" and plan.context == {"k": 1}
    plan.validate()


def test_list_planner_revision_replaces_failed_steps_and_rewires_dependants() -> None:
    plan = ListPlanner(["x", "y", "z"]).create_plan("goal", {})
    plan.steps[0].status = StepStatus.VERIFIED_COMPLETED
    plan.steps[1].status = StepStatus.RECOVERY_PENDING
    revised = ListPlanner(["x", "y", "z"]).revise_plan(plan, [], [])
    assert [s.id for s in revised.steps] == ["step_1", "step_2_r2", "step_3"]
    assert revised.steps[2].dependencies == ["step_2_r2"]
    assert revised.steps[1].metadata["replaces"] == "step_2" and revised.version == 2
    revised.validate()


def test_list_planner_refuses_a_bare_string() -> None:
    with pytest.raises(TypeError, match="list"):
        ListPlanner("abc")


async def test_callable_actor_awaits_async_functions() -> None:
    async def fn(step: Step, observations: list[Observation], context: LoopContext) -> str:
        return step.id

    assert await CallableActor(fn).execute(Step(id="s"), [], LoopContext()) == "s"
    assert await CallableActor(lambda s, o, c: 3).execute(Step(), [], LoopContext()) == 3


async def test_call_component_handles_sync_and_async() -> None:
    async def coro() -> int:
        return 2

    assert await call_component(lambda: 1) == 1
    assert await call_component(coro) == 2


def test_pass_through_observer_and_predicate_evaluator() -> None:
    step = Step(id="s1")
    observation = PassThroughObserver().observe({"v": 1}, step, LoopContext())
    assert observation.content == {"v": 1} and observation.step_id == "s1"
    plan = Plan(steps=[step])
    evaluator = PredicateEvaluator(lambda s, out: out["v"] == 1)
    assert evaluator.evaluate(plan, [observation], "", LoopContext()).passed
    observation.content = {"v": 2}
    verdict = evaluator.evaluate(plan, [observation], "", LoopContext())
    assert not verdict.passed and verdict.feedback and verdict.step_id == "s1"
    assert not evaluator.evaluate(plan, [], "", LoopContext()).passed


def test_max_iterations_terminator() -> None:
    terminator = MaxIterationsTerminator(2)
    assert not terminator.should_terminate(LoopState(current_iteration=1), "", LoopContext())
    assert terminator.should_terminate(LoopState(current_iteration=2), "", LoopContext())
