"""A deterministic three-step loop that recovers from one wrong answer.

Step 2 answers wrongly on its first attempt; the evaluator rejects it; the
default recovery policy retries it; the retry passes; step 3 runs; the run
completes. Every check below is computed from the finished run, and the
script exits 0 only if all of them hold::

    python examples/deterministic_multistep_loop.py         # any Python 3.11+ with the dependencies
    .venv/bin/python examples/deterministic_multistep_loop.py   # after `make test`: it has them
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

# Run as a script, Python puts examples/ on the path, not the repository: without this,
# `python examples/...` fails with "No module named 'loop_engine'" outside the venv.
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

try:
    from loop_engine.components import CallableActor, ListPlanner, PredicateEvaluator
    from loop_engine.engine import LoopEngine
    from loop_engine.state_machine import TRANSITIONS, derive_result_status
    from loop_engine.types import (
        ComponentType,
        ExecutionState,
        FailureStatus,
        FailureType,
        LoopContext,
        LoopResult,
        LoopStatus,
        Observation,
        RecoveryStrategy,
        Step,
        StepStatus,
    )
except ModuleNotFoundError as missing:  # a dependency of loop_engine, not installed for this Python
    if __name__ != "__main__" or (missing.name or "").partition(".")[0] == "loop_engine":
        raise
    sys.exit(
        f"{Path(sys.argv[0]).name}: this Python ({sys.executable}) lacks {missing.name!r}, which loop_engine "
        f"needs. Run it with the project's venv: .venv/bin/python {Path(__file__).relative_to(REPO)} "
        f"(`make test` creates .venv), or install the dependencies: pip install -e {REPO}"
    )

__all__ = ["build_engine", "checks", "main"]

STEPS = ["add 2 and 3", "multiply the sum by 4", "subtract 6"]
EXPECTED = {"step_1": 5, "step_2": 20, "step_3": 14}


def build_engine() -> LoopEngine:
    """The loop: a list planner, an arithmetic actor that slips once, an exact evaluator."""
    attempts: dict[str, int] = {}

    def act(step: Step, observations: list[Observation], context: LoopContext) -> int:
        attempts[step.id] = attempts.get(step.id, 0) + 1
        inputs = [o.content for o in observations if o.step_id in step.dependencies]
        previous = inputs[-1] if inputs else 0  # the latest output of the step this one builds on
        if step.id == "step_1":
            return 2 + 3
        if step.id == "step_2":
            return previous + 4 if attempts[step.id] == 1 else previous * 4  # first try: wrong operation
        return previous - 6

    engine = LoopEngine()
    engine.register_component(ComponentType.PLANNER, ListPlanner(STEPS))
    engine.register_component(ComponentType.ACTOR, CallableActor(act))
    engine.register_component(
        ComponentType.EVALUATOR,
        PredicateEvaluator(lambda step, output: output == EXPECTED[step.id], feedback="wrong number"),
    )
    return engine


def checks(engine: LoopEngine, result: LoopResult) -> list[tuple[str, bool, str]]:
    """(name, passed, detail) for every claim this example makes about its run."""
    state = engine.state
    plan = state.current_plan
    steps = {s.id: s for s in plan.steps} if plan else {}
    step_2_failures = [f for f in state.failures if f.step_id == "step_2"]
    failure_ids = {f.failure_id for f in step_2_failures}
    linked = [r for r in state.recoveries if r.failure_id in failure_ids]
    rejections = [e for e in state.evaluations if e.step_id == "step_2" and not e.passed]
    broken = _broken_moves(state.transitions, state.execution_state)
    outputs: dict[str, Any] = {sid: s.output for sid, s in steps.items()}
    return [
        ("failure recorded for step_2", len(step_2_failures) == 1, f"{len(step_2_failures)} failure(s) on step_2"),
        (
            "the evaluator rejected step_2",
            len(rejections) == 1
            and all(f.source_component == "evaluator" for f in step_2_failures)
            and all(f.type is FailureType.INVALID_OUTPUT for f in step_2_failures),
            ", ".join(f"{f.type.name} from {f.source_component or '?'}" for f in step_2_failures)
            + f"; {len(rejections)} rejecting evaluation(s)",
        ),
        ("only step_2 failed", len(state.failures) == len(step_2_failures), f"{len(state.failures)} failure(s) in all"),
        (
            "one RETRY linked to the failure, and it worked",
            len(linked) == 1
            and linked[0].strategy is RecoveryStrategy.RETRY
            and linked[0].executed
            and linked[0].success is True,
            ", ".join(f"{r.strategy.name} executed={r.executed} success={r.success}" for r in linked) or "none",
        ),
        (
            "failure recovered",
            all(f.status is FailureStatus.RECOVERED for f in step_2_failures),
            ", ".join(f.status.name for f in step_2_failures),
        ),
        ("step_2 attempts == 2", steps.get("step_2") is not None and steps["step_2"].attempts == 2,
         f"attempts={steps['step_2'].attempts if 'step_2' in steps else None}"),
        (
            "all steps VERIFIED_COMPLETED",
            bool(steps) and all(s.status is StepStatus.VERIFIED_COMPLETED for s in steps.values()),
            ", ".join(f"{sid}={s.status.name}" for sid, s in steps.items()),
        ),
        ("outputs correct", outputs == EXPECTED, str(outputs)),
        (
            "every move in the table, each from where the last ended",
            not broken,
            f"{len(state.transitions)} transitions, broken: {broken}",
        ),
        ("result COMPLETED", result.status is LoopStatus.COMPLETED, f"result.status={result.status.name}"),
        (
            "statuses agree",
            derive_result_status(state) is result.status and state.status is LoopStatus.COMPLETED,
            f"state.status={state.status.name}",
        ),
        (
            "never RUNNING at the end",
            state.status is not LoopStatus.RUNNING and result.status is not LoopStatus.RUNNING,
            f"execution_state={state.execution_state.value}",
        ),
        ("iterations == 4", result.iterations == 4, f"iterations={result.iterations} (3 steps + 1 retry)"),
    ]


def _broken_moves(moves: list[tuple[str, str]], end: ExecutionState) -> list[str]:
    """Moves that are not in the table or do not start where the previous one ended."""
    broken, where = [], ExecutionState.INITIALIZED.value
    for a, b in moves:
        if a != where or ExecutionState(b) not in TRANSITIONS[ExecutionState(a)]:
            broken.append(f"{a}->{b} (was at {where})")
        where = b
    if where != end.value:
        broken.append(f"ends at {where}, run is at {end.value}")
    return broken


def main() -> int:
    engine = build_engine()
    result = asyncio.run(engine.run(LoopContext(goal="compute ((2 + 3) * 4) - 6")))
    results = checks(engine, result)
    for name, passed, detail in results:
        print(f"[{'PASS' if passed else 'FAIL'}] {name}: {detail}")
    failed = sum(1 for _, passed, _ in results if not passed)
    print(f"{len(results) - failed}/{len(results)} checks passed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
