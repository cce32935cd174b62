"""Tutorial 4 runs unchanged and prints what it says (issue 3, item 1).

The tutorial's code blocks are pasted verbatim after a Tutorial-1 style
prelude (a two-step plan, an actor, and a terminator that fires after
iteration 1), written to a script and run in a fresh interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PRELUDE = """
import asyncio

from loop_engine import ComponentType, LoopConfig, LoopContext, LoopEngine, Plan, Step


class Planner:
    def create_plan(self, goal, initial_context):
        return Plan(goal=goal, steps=[Step(id="step_1", description="look"),
                                      Step(id="step_2", description="fix", dependencies=["step_1"])])

    def revise_plan(self, plan, observations, evaluations):
        return plan


class Actor:
    def execute(self, step, observations, context):
        return {"done": step.id}


class StopAfterFirstIteration:
    def should_terminate(self, state, goal, context):
        return state.current_iteration >= 1


engine = LoopEngine(LoopConfig())
engine.register_component(ComponentType.PLANNER, Planner())
engine.register_component(ComponentType.ACTOR, Actor())
engine.register_component(ComponentType.TERMINATOR, StopAfterFirstIteration())
context = LoopContext(goal="tutorial 1")
result = asyncio.run(engine.run(context))
"""

PERSISTENCE_BLOCK = """
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig

persistence = LoopStatePersistence(PersistenceConfig(state_dir="my_state", format="json"))

saved_path = persistence.save(engine.state, trace_id="demo-run-1")
print("saved to:", saved_path.name)

reloaded = persistence.load("demo-run-1")
print("reloaded iteration:", reloaded.current_iteration)
print("reloaded status:", reloaded.status.name)
"""

CHECKPOINT_PRELUDE = """
from loop_engine.types import Failure, FailureType, LoopState
state = LoopState()
"""

CHECKPOINT_BLOCKS = """
from loop_engine.checkpoint import HumanCheckpoint, CheckpointConfig, CheckpointTrigger

checkpoint = HumanCheckpoint(CheckpointConfig(
    trigger_on_major_failure=True,
    save_checkpoints=False,
))

trigger = checkpoint.should_pause(state)
print("no failures yet, should_pause:", trigger)

failure = Failure(type=FailureType.EXECUTION_ERROR, message="repeated tool failure")
failure.mark_terminal()
state.failures.append(failure)

trigger = checkpoint.should_pause(state)
print("after terminal failure, should_pause:", trigger)

review = checkpoint.present_for_review(state, trigger, proposed_action="Escalate to human")
print(review.to_markdown())
"""

EXPECTED = [
    "saved to: loop_state_demo-run-1.json",
    "reloaded iteration: 1",
    "reloaded status: TERMINATED",
    "no failures yet, should_pause: None",
    "after terminal failure, should_pause: CheckpointTrigger.ON_MAJOR_FAILURE",
    "# Human Checkpoint: checkpoint_0001",
    "",
    "**Triggered by:** ON_MAJOR_FAILURE",
    re.compile(r"\*\*Time:\*\* \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d"),  # with its zone
    "**Proposed Action:** Escalate to human",
    "",
    "## State Summary",
    "",
    "- **Iteration:** 0",
    "- **Status:** PENDING",
    "- **Failures:** 1",
]


def test_tutorial_4_prints_what_it_says(tmp_path: Path) -> None:
    script = tmp_path / "tutorial4.py"
    script.write_text(
        "\n".join(
            textwrap.dedent(block) for block in (PRELUDE, PERSISTENCE_BLOCK, CHECKPOINT_PRELUDE, CHECKPOINT_BLOCKS)
        ),
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) > len(EXPECTED), done.stdout
    for got, want in zip(lines[: len(EXPECTED)], EXPECTED, strict=True):
        if isinstance(want, str):
            assert got == want, done.stdout
        else:
            assert want.fullmatch(got), (got, done.stdout)
    assert (tmp_path / "my_state" / "loop_state_demo-run-1.json").is_file()
    assert not list((tmp_path / "my_state").glob("*.md"))
