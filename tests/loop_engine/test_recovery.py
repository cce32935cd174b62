"""Every recovery strategy, executed for real through the RecoveryRegistry."""

from __future__ import annotations

import random
from typing import Any

import pytest

from loop_engine.components import ListPlanner
from loop_engine.config import LoopConfig
from loop_engine.recovery import DefaultRecoveryPolicy, RecoveryRegistry, backoff_delay
from loop_engine.types import (
    ComponentType,
    ExecutionState,
    Failure,
    FailureStatus,
    LoopContext,
    LoopState,
    LoopStatus,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    StepStatus,
)

from .loops import FakeSleep, flaky_actor, make_engine


class Always:
    """A Recovery component that always picks ``strategy``."""

    def __init__(self, strategy: RecoveryStrategy) -> None:
        self.strategy, self.calls = strategy, 0

    def recover(self, failure: Failure, state: LoopState, context: LoopContext) -> RecoveryAction:
        self.calls += 1
        return RecoveryAction(strategy=self.strategy)


def engine_with(strategy: RecoveryStrategy, bad: dict[str, int], **kwargs: Any) -> Any:
    engine = make_engine(["a", "b", "c"], act=flaky_actor(bad), **kwargs)
    engine.register_component(ComponentType.RECOVERY, Always(strategy))
    return engine


def assert_linked(result: Any) -> None:
    ids = {f.failure_id for f in result.failures}
    assert result.recoveries and all(r.failure_id in ids and r.executed for r in result.recoveries)
    for failure in result.failures:
        linked = [r.action_id for r in result.recoveries if r.failure_id == failure.failure_id]
        assert failure.recovery_action_ids == linked


async def test_retry_marks_recovered_only_after_the_retried_step_passes() -> None:
    engine = engine_with(RecoveryStrategy.RETRY, {"step_2": 1})
    seen: list[FailureStatus] = []
    original = engine._recover

    async def spy(failure: Failure) -> None:
        await original(failure)
        seen.append(failure.status)

    engine._recover = spy  # type: ignore[method-assign]
    result = await engine.run(LoopContext(goal="g"))
    assert seen == [FailureStatus.RECOVERY_IN_PROGRESS]
    assert result.status is LoopStatus.COMPLETED and result.failures[0].status is FailureStatus.RECOVERED
    assert result.recoveries[0].success is True
    assert_linked(result)


async def test_backoff_waits_exponentially_with_jitter_through_injected_sleep() -> None:
    sleep = FakeSleep()
    config = LoopConfig(backoff_base_seconds=2.0, backoff_max_seconds=5.0, backoff_jitter=0.1, max_recovery_attempts=5)
    engine = engine_with(RecoveryStrategy.BACKOFF, {"step_1": 3}, config=config, sleep=sleep, rng=random.Random(7))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert len(sleep.delays) == 3
    for delay, nominal in zip(sleep.delays, [2.0, 4.0, 5.0], strict=True):
        assert nominal * 0.9 <= delay <= nominal * 1.1
    assert len(set(sleep.delays)) == 3
    assert [r.params["delay_seconds"] for r in result.recoveries] == sleep.delays
    assert_linked(result)


@pytest.mark.parametrize(
    ("attempt", "rand", "expected"), [(1, 0.5, 1.0), (3, 0.5, 4.0), (10, 0.5, 60.0), (1, 0.0, 0.9), (1, 1.0, 1.1)]
)
def test_backoff_delay_formula(attempt: int, rand: float, expected: float) -> None:
    assert backoff_delay(attempt, LoopConfig(), rand) == pytest.approx(expected)


async def test_plan_revision_replaces_step_and_dependants_still_run() -> None:
    engine = engine_with(RecoveryStrategy.PLAN_REVISION, {"step_2": 1})
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    ids = [s.id for s in result.plan.steps]
    assert ids == ["step_1", "step_2_r2", "step_3"] and result.plan.version == 2
    assert result.plan.get_step("step_3").dependencies == ["step_2_r2"]
    assert all(s.status is StepStatus.VERIFIED_COMPLETED for s in result.plan.steps)
    assert result.failures[0].status is FailureStatus.RECOVERED
    assert result.recoveries[0].params["replaced_by"] == "step_2_r2"
    assert ("recovering", "replanning") in engine.state.transitions
    assert ("replanning", "iteration_complete") in engine.state.transitions
    assert_linked(result)


class RenamingPlanner(ListPlanner):
    """Revises by replacing the failed step with a fresh id and forgetting dependants' links."""

    def revise_plan(self, plan: Plan, observations: Any, evaluations: Any) -> Plan:
        fresh = self.create_plan(plan.goal, {})
        fresh.steps[1].id = "new_b"  # step_3 still depends on step_2: the engine rewires it
        return Plan(id=plan.id, goal=plan.goal, steps=fresh.steps, version=plan.version + 1)


async def test_plan_revision_rewires_dependencies_and_keeps_completed_steps() -> None:
    engine = engine_with(RecoveryStrategy.PLAN_REVISION, {"step_2": 1})
    engine.register_component(ComponentType.PLANNER, RenamingPlanner(["a", "b", "c"]), allow_replace=True)
    act_calls = engine._components[ComponentType.ACTOR].fn.calls
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert result.plan.get_step("step_3").dependencies == ["new_b"]
    assert act_calls["step_1"] == 1  # carried over as completed, not re-run
    assert result.plan.get_step("step_1").status is StepStatus.VERIFIED_COMPLETED


async def test_human_handoff_stops_waiting_for_human_with_escalated_failure() -> None:
    engine = engine_with(RecoveryStrategy.HUMAN_HANDOFF, {"step_2": 1})
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.PAUSED and engine.state.status is LoopStatus.PAUSED
    assert engine.state.execution_state is ExecutionState.WAITING_FOR_HUMAN
    assert result.review_request is not None and result.review_request is engine.state.pending_review
    assert result.review_request.checkpoint_id == "checkpoint_0001"
    assert result.failures[0].status is FailureStatus.ESCALATED
    assert "Retry step step_2" in result.review_request.proposed_action
    assert_linked(result)


async def test_graceful_degradation_skips_and_ends_partially_completed() -> None:
    engine = engine_with(RecoveryStrategy.GRACEFUL_DEGRADATION, {"step_2": 1})
    result = await engine.run(LoopContext(goal="g"))
    assert engine.state.execution_state is ExecutionState.PARTIALLY_COMPLETED
    assert result.execution_state is ExecutionState.PARTIALLY_COMPLETED
    assert result.status is LoopStatus.COMPLETED and engine.state.status is LoopStatus.COMPLETED
    assert result.plan.get_step("step_2").status is StepStatus.SKIPPED
    assert result.plan.get_step("step_3").status is StepStatus.VERIFIED_COMPLETED
    assert_linked(result)


async def test_circuit_break_after_n_consecutive_failures_with_default_policy() -> None:
    config = LoopConfig(circuit_breaker_threshold=3, max_recovery_attempts=10)
    engine = make_engine(["a"], act=flaky_actor({"step_1": 99}), config=config)
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert result.reason == "circuit breaker opened after 3 consecutive failures"
    assert [r.strategy for r in result.recoveries] == [RecoveryStrategy.RETRY] * 2 + [RecoveryStrategy.CIRCUIT_BREAK]
    assert result.failures[0].status is FailureStatus.TERMINAL
    assert_linked(result)


async def test_retry_attempts_are_capped_even_if_the_policy_keeps_asking() -> None:
    engine = engine_with(RecoveryStrategy.RETRY, {"step_1": 99}, config=LoopConfig(max_recovery_attempts=2))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED
    assert [(r.executed, r.success) for r in result.recoveries] == [(True, False), (True, False), (False, False)]
    assert "refused" in result.recoveries[-1].reason
    assert result.failures[0].recovery_attempts == 2


async def test_recovery_disabled_fails_on_first_failure() -> None:
    engine = make_engine(["a"], act=flaky_actor({"step_1": 1}), config=LoopConfig(enable_recovery=False))
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and not result.recoveries


def test_default_policy_choices() -> None:
    policy = DefaultRecoveryPolicy(escalate=False, circuit_breaker_threshold=2)
    failure = Failure(max_recovery_attempts=1)
    assert policy.recover(failure, LoopState(), LoopContext()).strategy is RecoveryStrategy.RETRY
    failure.recovery_attempts = 1
    assert policy.recover(failure, LoopState(), LoopContext()) is None
    escalated = DefaultRecoveryPolicy(escalate=True).recover(failure, LoopState(), LoopContext())
    assert escalated is not None and escalated.strategy is RecoveryStrategy.HUMAN_HANDOFF
    tripped = policy.recover(failure, LoopState(consecutive_failures=2), LoopContext())
    assert tripped is not None and tripped.strategy is RecoveryStrategy.CIRCUIT_BREAK


def test_registry_maps_every_strategy() -> None:
    registry = RecoveryRegistry()
    for strategy in RecoveryStrategy:
        assert registry.get(strategy).strategy is strategy
    with pytest.raises(TypeError, match="RecoveryStrategy"):
        registry.register("retry", registry.get(RecoveryStrategy.RETRY))  # type: ignore[arg-type]
