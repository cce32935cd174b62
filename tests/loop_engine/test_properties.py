"""Property: whatever the components do, the engine stays inside its contract.

Components pass, fail, raise or return garbage in random sequences; every run
must make only table transitions, stop within ``max_iterations``, never end
RUNNING, and report statuses that agree through ``derive_result_status``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loop_engine.components import ListPlanner
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.gates.base import DeterministicGate, GateContext, GateResult
from loop_engine.review import HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.state_machine import TRANSITIONS, derive_result_status, state_status_for
from loop_engine.types import (
    Budget,
    ComponentType,
    Evaluation,
    ExecutionState,
    LoopContext,
    LoopStatus,
    Observation,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    Step,
)

from .loops import FakeSleep, checkpoint

BEHAVIOURS = st.sampled_from(["pass", "fail", "raise", "garbage"])


class Scripted:
    """Every component at once, each answering from its own cycled script."""

    def __init__(self, scripts: dict[str, list[Any]], steps: int) -> None:
        self.scripts = {name: itertools.cycle(script) for name, script in scripts.items()}
        self.planner = ListPlanner([f"s{i}" for i in range(steps)])

    def _next(self, name: str) -> Any:
        return next(self.scripts[name])

    def create_plan(self, goal: str, initial_context: Any) -> Any:
        behaviour = self._next("planner")
        if behaviour == "raise":
            raise RuntimeError("planner broke")
        if behaviour == "garbage":  # a Plan on the outside, junk within
            return Plan(goal=goal, steps=[Step(id="s0", status="pending")])  # type: ignore[arg-type]
        return self.planner.create_plan(goal, initial_context)

    def revise_plan(self, plan: Any, observations: Any, evaluations: Any) -> Any:
        behaviour = self._next("planner")
        if behaviour == "raise":
            raise RuntimeError("revision broke")
        if behaviour == "garbage":
            return Plan(goal=plan.goal, steps=["s0", None])  # type: ignore[list-item]
        return self.planner.revise_plan(plan, observations, evaluations)

    async def execute(self, step: Any, observations: Any, context: Any) -> Any:
        behaviour = self._next("actor")
        if behaviour == "raise":
            raise OSError("tool failed")
        return {"pass": "ok", "fail": "wrong", "garbage": object()}[behaviour]

    def observe(self, result: Any, step: Any, context: Any) -> Any:
        behaviour = self._next("observer")
        if behaviour == "raise":
            raise ValueError("observer broke")
        if behaviour == "garbage":
            return 17
        return Observation(content=result, step_id=step.id)

    def evaluate(self, plan: Any, observations: Any, goal: str, context: Any) -> Any:
        behaviour = self._next("evaluator")
        if behaviour == "raise":
            raise ValueError("evaluator broke")
        if behaviour == "garbage":
            return "looks fine"
        return Evaluation(passed=behaviour == "pass" and observations[-1].content == "ok")

    def recover(self, failure: Any, state: Any, context: Any) -> Any:
        choice = self._next("recovery")
        if choice == "raise":
            raise RuntimeError("policy broke")
        if choice == "garbage":
            return "retry please"
        if choice == "none":
            return None
        return RecoveryAction(strategy=choice)

    def should_terminate(self, state: Any, goal: str, context: Any) -> Any:
        behaviour = self._next("terminator")
        if behaviour == "raise":
            raise ValueError("terminator broke")
        if behaviour == "garbage":
            return "no"
        return behaviour == "pass"

    def verify(self, step: Any, observations: Any, context: Any) -> Any:
        behaviour = self._next("verifier")
        if behaviour == "raise":
            raise ValueError("verifier broke")
        if behaviour == "garbage":
            return "sure"
        return behaviour == "pass"

    def decide(self, request: ReviewRequest) -> ReviewResponse:
        """The human: answers every review from the decision script."""
        decision = self._next("human")
        modifications = {"context": {"note": "reviewed"}} if decision is HumanDecision.MODIFY else {}
        return ReviewResponse(
            checkpoint_id=request.checkpoint_id, decision=decision, feedback="scripted", modifications=modifications
        )


class ScriptedGate(DeterministicGate):
    """A gate that passes, fails or raises from the shared script."""

    name = "scripted"

    def __init__(self, components: Scripted) -> None:
        self.components = components

    def check(self, context: GateContext) -> GateResult:
        behaviour = self.components._next("gate")
        if behaviour == "raise":
            raise RuntimeError("gate broke")
        return self.result(behaviour != "fail", "scripted verdict")


def scripts() -> st.SearchStrategy[dict[str, list[Any]]]:
    mostly_pass = st.lists(BEHAVIOURS, min_size=1, max_size=6)
    rarely_stop = st.lists(st.sampled_from(["fail"] * 6 + ["pass", "raise", "garbage"]), min_size=1, max_size=6)
    recovery = st.lists(
        st.sampled_from([*RecoveryStrategy, "none", "raise", "garbage"]), min_size=1, max_size=6
    )
    return st.fixed_dictionaries(
        {
            "planner": st.lists(st.sampled_from(["pass"] * 4 + ["raise", "garbage"]), min_size=1, max_size=4),
            "actor": mostly_pass,
            "observer": mostly_pass,
            "evaluator": mostly_pass,
            "recovery": recovery,
            "terminator": rarely_stop,
            "verifier": mostly_pass,
            "gate": st.lists(st.sampled_from(["pass"] * 4 + ["fail", "raise"]), min_size=1, max_size=4),
            "human": st.lists(st.sampled_from(list(HumanDecision)), min_size=1, max_size=5),
        }
    )


CHECKPOINT_CONFIGS = st.fixed_dictionaries(
    {
        "trigger_on_failure": st.booleans(),
        "trigger_on_major_failure": st.booleans(),
        "trigger_on_plan_complete": st.booleans(),
        "trigger_every_n_iterations": st.sampled_from([None, 1, 2]),
    }
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    scripts=scripts(),
    steps=st.integers(min_value=1, max_value=4),
    max_iterations=st.integers(min_value=1, max_value=8),
    with_terminator=st.booleans(),
    with_verifier=st.booleans(),
    gate_stage=st.sampled_from([None, "pre", "post"]),
    human=st.sampled_from(["none", "absent", "handler"]),
    checkpoint_config=CHECKPOINT_CONFIGS,
    max_steps=st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_engine_keeps_its_contract(
    scripts: dict[str, list[Any]],
    steps: int,
    max_iterations: int,
    with_terminator: bool,
    with_verifier: bool,
    gate_stage: str | None,
    human: str,
    checkpoint_config: dict[str, Any],
    max_steps: int | None,
    seed: int,
) -> None:
    components = Scripted(scripts, steps)
    config = LoopConfig(
        max_iterations=max_iterations,
        max_recovery_attempts=2,
        circuit_breaker_threshold=4,
        enable_verification=with_verifier,
        backoff_base_seconds=0.5,
        backoff_max_seconds=2.0,
    )
    cp = None
    if human != "none":
        cp = checkpoint(components.decide if human == "handler" else None, **checkpoint_config)
    sleep = FakeSleep()
    engine = LoopEngine(config, checkpoint=cp, sleep=sleep, rng=random.Random(seed))
    kinds = [
        ComponentType.PLANNER,
        ComponentType.ACTOR,
        ComponentType.OBSERVER,
        ComponentType.EVALUATOR,
        ComponentType.RECOVERY,
    ]
    if with_terminator:
        kinds.append(ComponentType.TERMINATOR)
    if with_verifier:
        kinds.append(ComponentType.VERIFIER)
    for kind in kinds:
        engine.register_component(kind, components)
    if gate_stage is not None:
        engine.add_gate(ScriptedGate(components), stage=gate_stage)

    context = LoopContext(goal="g", budget=Budget(max_steps=max_steps))
    result = asyncio.run(engine.run(context))
    state = engine.state

    where = "initialized"
    for a, b in state.transitions:  # table moves only, each starting where the last one ended
        assert a == where and ExecutionState(b) in TRANSITIONS[ExecutionState(a)], (where, a, b)
        where = b
    assert where == state.execution_state.value
    assert state.current_iteration <= max_iterations
    assert max_steps is None or context.budget.steps_used <= max_steps
    assert state.execution_state.is_terminal or state.execution_state is ExecutionState.WAITING_FOR_HUMAN
    assert state.status is not LoopStatus.RUNNING and result.status is not LoopStatus.RUNNING
    assert result.status is derive_result_status(state)
    assert state.status is state_status_for(state.execution_state)
    assert result.execution_state is state.execution_state and result.iterations == state.current_iteration
    assert (result.status is LoopStatus.PAUSED) == (state.status is LoopStatus.PAUSED)
    if result.status is LoopStatus.PAUSED:
        assert result.review_request is not None and state.pending_review is result.review_request
    else:
        assert result.review_request is None
    if human != "handler":
        assert state.decisions == []
    assert all(d.checkpoint_id.startswith("checkpoint_") for d in state.decisions)
    ids = {f.failure_id for f in state.failures}
    assert all(r.failure_id in ids for r in state.recoveries)
    if state.execution_state.is_terminal:
        assert all(r.success is not None for r in state.recoveries)
    backoffs = [r for r in state.recoveries if r.strategy is RecoveryStrategy.BACKOFF and r.executed]
    assert sleep.delays == [r.params["delay_seconds"] for r in backoffs]
    assert all(0 < d <= 2.0 * 1.1 for d in sleep.delays)
