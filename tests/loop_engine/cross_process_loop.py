"""A loop driven from separate processes by test_cross_process.py.

    python cross_process_loop.py run STATE_DIR TRACE      # run until paused, print PAUSED, wait to be killed
    python cross_process_loop.py resume STATE_DIR TRACE   # load the snapshot, APPROVE, print the result
    python cross_process_loop.py straight STATE_DIR TRACE # same loop, a handler that approves; print the result

Results are printed as one JSON line prefixed ``RESULT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import CallableActor, ListPlanner, PredicateEvaluator
from loop_engine.engine import LoopEngine
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig
from loop_engine.review import HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import ComponentType, LoopContext, LoopResult, Observation, Step


def act(step: Step, observations: list[Observation], context: LoopContext) -> dict[str, Any]:
    wrong = step.id == "step_2" and step.attempts == 1  # decided by saved state, not process memory
    return {"step": step.id, "value": -1 if wrong else len(step.description), "hint": context.initial_context["hint"]}


def approve(request: ReviewRequest) -> ReviewResponse:
    return ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.APPROVE, reviewer="robot")


def build(state_dir: str, with_handler: bool) -> LoopEngine:
    checkpoint = HumanCheckpoint(
        CheckpointConfig(trigger_every_n_iterations=2, save_checkpoints=False),
        decision_handler=approve if with_handler else None,
    )
    persistence = LoopStatePersistence(PersistenceConfig(state_dir=state_dir, format="json", durable=True))
    engine = LoopEngine(checkpoint=checkpoint, persistence=persistence)
    engine.register_component(ComponentType.PLANNER, ListPlanner(["alpha", "beta", "gamma", "delta"]))
    engine.register_component(ComponentType.ACTOR, CallableActor(act))
    engine.register_component(ComponentType.EVALUATOR, PredicateEvaluator(lambda step, out: out["value"] > 0))
    return engine


def summary(result: LoopResult) -> dict[str, Any]:
    return {
        "status": result.status.name,
        "execution_state": result.execution_state.value if result.execution_state else None,
        "iterations": result.iterations,
        "outputs": {s.id: s.output for s in result.plan.steps} if result.plan else {},
        "failures": [
            [f.failure_id, f.step_id, f.type.name, f.status.name, f.recovery_attempts, f.message]
            for f in result.failures
        ],
        "recoveries": [[r.strategy.name, r.failure_id, r.executed, r.success] for r in result.recoveries],
    }


def emit(result: LoopResult) -> None:
    print("RESULT " + json.dumps(summary(result), sort_keys=True), flush=True)


async def main(mode: str, state_dir: str, trace: str) -> None:
    context = LoopContext(goal="measure words", initial_context={"hint": "count letters"})
    if mode == "run":
        result = await build(state_dir, with_handler=False).run(context, trace_id=trace)
        print(f"PAUSED {result.status.name} {result.review_request.checkpoint_id}", flush=True)
        while True:  # stay alive until the test kills this process
            time.sleep(1)
    elif mode == "resume":
        persistence = LoopStatePersistence(PersistenceConfig(state_dir=state_dir, format="json"))
        state = persistence.load(trace)
        response = approve(state.pending_review)
        # later checkpoints of the resumed run are approved inline, as in the straight run
        emit(await build(state_dir, with_handler=True).resume(state, response))
    elif mode == "straight":
        emit(await build(state_dir, with_handler=True).run(context, trace_id=trace))
    else:
        raise SystemExit(f"unknown mode {mode!r}; use run, resume or straight")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
