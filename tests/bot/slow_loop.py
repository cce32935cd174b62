"""A ``factory:`` loop for tests: slow steps that leave a trail, optionally one review.

Config: ``factory: tests.bot.slow_loop:build`` with options ``steps`` (how
many, default 3), ``delay`` (seconds each step takes, default 1.0),
``trail`` (a file each step appends "start <step> <pid>" and "done <step>
<pid>" lines to) and ``review_after`` (the 1-based step after which the run
asks for a review; 0 = never) and ``gate`` (a file: each step, once started,
waits until it exists - a step that blocks until the test releases it) and
``fail_at`` (the 1-based step whose actor raises ``FAIL_MESSAGE``, on the line
``FAIL_LINE`` names; 0 = never). Real ``loopbot serve`` subprocesses import
it with ``PYTHONPATH`` set to the repository root.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import ListPlanner, PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.types import ComponentType, LoopContext, Observation, Step

from bot.patterns import LoopSpec

__all__ = ["build", "trail_lines", "FAIL_LINE", "FAIL_MESSAGE"]


def trail_lines(trail: Path) -> list[str]:
    return trail.read_text(encoding="utf-8").splitlines() if trail.exists() else []


FAIL_MESSAGE = "the loop's own bug"


def _fail(step: Step) -> None:
    raise RuntimeError(f"{FAIL_MESSAGE} in {step.id}")


#: The line of this file the failing step raises on (``fail_at``).
FAIL_LINE = _fail.__code__.co_firstlineno + 1

#: How long a gated step waits for its gate before it fails (a test that forgot to release it).
GATE_TIMEOUT = 60.0


class _SlowActor:
    def __init__(self, checkpoint: HumanCheckpoint, delay: float, trail: Path, review_after: int,
                 gate: Path | None = None, fail_at: int = 0) -> None:
        self.checkpoint, self.delay, self.trail, self.review_after = checkpoint, delay, trail, review_after
        self.gate, self.fail_at = gate, fail_at

    def _mark(self, what: str, step: Step) -> None:
        with self.trail.open("a", encoding="utf-8") as out:
            out.write(f"{what} {step.id} {os.getpid()}\n")

    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        self._mark("start", step)
        if step.id == f"step_{self.fail_at}":
            _fail(step)
        time.sleep(self.delay)  # the slow work a shutdown must let finish
        deadline = time.monotonic() + GATE_TIMEOUT
        while self.gate is not None and not self.gate.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{step.id}: its gate {self.gate} was never opened")
            time.sleep(0.02)
        self._mark("done", step)
        if step.id == f"step_{self.review_after}":
            self.checkpoint.request_review(f"check {step.id} before going on")
        return {"step": step.id}


def build(options: dict[str, Any]) -> LoopSpec:
    steps = int(options.get("steps", 3))
    delay = float(options.get("delay", 1.0))
    trail = Path(str(options["trail"]))
    review_after = int(options.get("review_after", 0))
    gate = Path(str(options["gate"])) if options.get("gate") else None
    fail_at = int(options.get("fail_at", 0))

    def engine_factory(*, checkpoint: Any = None, persistence: Any = None) -> LoopEngine:
        checkpoint = checkpoint or HumanCheckpoint(CheckpointConfig(save_checkpoints=False))
        engine = LoopEngine(LoopConfig(max_iterations=50), checkpoint=checkpoint, persistence=persistence)
        engine.register_component(ComponentType.PLANNER, ListPlanner([f"slow step {n}" for n in range(1, steps + 1)]))
        engine.register_component(ComponentType.ACTOR, _SlowActor(checkpoint, delay, trail, review_after, gate,
                                                                            fail_at))
        engine.register_component(ComponentType.OBSERVER, PassThroughObserver())
        return engine

    def context_factory() -> LoopContext:
        return LoopContext(goal=f"{steps} slow steps", initial_context={})

    return LoopSpec(engine_factory=engine_factory, context_factory=context_factory)
