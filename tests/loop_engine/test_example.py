"""The worked example runs as a script and every check it prints passes."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from loop_engine.components import CallableActor
from loop_engine.types import ComponentType, LoopContext, LoopStatus, Observation, Step

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deterministic_multistep_loop.py"


def test_example_script_passes_every_check() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for name in (
        "failure recorded for step_2",
        "the evaluator rejected step_2",
        "one RETRY linked to the failure, and it worked",
        "step_2 attempts == 2",
        "all steps VERIFIED_COMPLETED",
        "every move in the table, each from where the last ended",
        "result COMPLETED",
        "never RUNNING at the end",
    ):
        assert any(line.startswith(f"[PASS] {name}:") for line in lines), (name, proc.stdout)
    assert not any(line.startswith("[FAIL]") for line in lines)


def _load_example() -> Any:
    spec = importlib.util.spec_from_file_location("deterministic_multistep_loop", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_checks_notice_when_the_run_is_not_the_one_described() -> None:
    """Step 2 raising (instead of answering wrongly) still completes, but the evaluator never rejected it."""
    example = _load_example()
    engine = example.build_engine()
    slipped: set[str] = set()

    def act(step: Step, observations: list[Observation], context: LoopContext) -> int:
        if step.id == "step_2" and step.id not in slipped:
            slipped.add(step.id)
            raise RuntimeError("calculator crashed")
        previous = next((o.content for o in reversed(observations) if o.step_id in step.dependencies), 0)
        return {"step_1": 5, "step_2": previous * 4, "step_3": previous - 6}[step.id]

    engine.register_component(ComponentType.ACTOR, CallableActor(act), allow_replace=True)
    result = asyncio.run(engine.run(LoopContext(goal="g")))
    assert result.status is LoopStatus.COMPLETED
    verdicts = {name: passed for name, passed, _ in example.checks(engine, result)}
    assert verdicts["the evaluator rejected step_2"] is False
    assert verdicts["outputs correct"] is True
