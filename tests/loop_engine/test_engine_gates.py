"""Gates wired into the engine: a failing pre-gate keeps the actor from running."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from loop_engine.config import LoopConfig
from loop_engine.errors import ConfigurationError
from loop_engine.gates.base import DeterministicGate, GateContext, GateResult
from loop_engine.types import FailureType, LoopContext, LoopStatus, Step

from .loops import make_engine


class RecordingGate(DeterministicGate):
    """Passes when ``verdict(context)`` is true; records every context it saw."""

    def __init__(self, name: str, verdict: Any) -> None:
        self.name, self.verdict, self.seen = name, verdict, []

    def check(self, context: GateContext) -> GateResult:
        self.seen.append(context)
        passed = bool(self.verdict(context))
        return self.result(passed, "" if passed else f"{self.name} said no", checked=context.step_id)


def counting_actor() -> Any:
    calls: list[str] = []

    def act(step: Step, obs: Any, ctx: Any) -> str:
        calls.append(step.id)
        return "good"

    return act, calls


async def test_failing_pre_gate_records_failure_and_actor_is_not_called() -> None:
    act, calls = counting_actor()
    engine = make_engine(["a", "b"], act=act, config=LoopConfig(max_recovery_attempts=1))
    gate = RecordingGate("no_b", lambda ctx: ctx.step_id != "step_2")
    engine.add_gate(gate, stage="pre")
    result = await engine.run(LoopContext(goal="g"))
    assert calls == ["step_1"]
    assert result.status is LoopStatus.FAILED
    [failure] = result.failures
    assert failure.step_id == "step_2" and failure.type is FailureType.EXECUTION_ERROR
    assert failure.evidence["gates"][0]["gate_name"] == "no_b"
    assert failure.evidence["gates"][0]["passed"] is False
    assert "pre-gate no_b failed" in failure.message
    assert gate.seen[0].step_description == "a" and gate.seen[0].budget is not None


async def test_post_gate_checks_output_before_evaluation() -> None:
    outputs = iter(["bad-shape", "good"])
    act = lambda step, obs, ctx: next(outputs)  # noqa: E731
    engine = make_engine(["a"], act=act)
    gate = RecordingGate("shape", lambda ctx: ctx.output == "good")
    engine.add_gate(gate, stage="post")
    result = await engine.run(LoopContext(goal="g"))
    assert [c.output for c in gate.seen] == ["bad-shape", "good"]
    assert result.status is LoopStatus.COMPLETED
    [failure] = result.failures
    assert failure.type is FailureType.INVALID_OUTPUT
    assert failure.evidence["gates"][0]["details"] == {"checked": "step_1"}
    assert result.evaluations and all(e.passed for e in result.evaluations)  # evaluator never saw the bad output
    assert ("acting", "recovering") in engine.state.transitions


async def test_a_gate_that_raises_is_a_recorded_failure() -> None:
    def explode(ctx: GateContext) -> bool:
        raise KeyError("boom")

    engine = make_engine(["a"], config=LoopConfig(max_recovery_attempts=1))
    engine.add_gate(RecordingGate("explodes", explode), stage="pre")
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.FAILED and "KeyError" in result.failures[0].message


def test_add_gate_refuses_unknown_stage_and_non_gates() -> None:
    engine = make_engine(["a"])
    with pytest.raises(ConfigurationError, match="'pre' or 'post'"):
        engine.add_gate(RecordingGate("x", bool), stage="during")
    with pytest.raises(ConfigurationError, match="check"):
        engine.add_gate(object())


async def test_gates_run_off_the_event_loop_thread() -> None:
    """Tool gates block on subprocesses; they must not stall other runs on the loop."""
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def record(ctx: GateContext) -> bool:
        threads.append(threading.get_ident())
        return True

    engine = make_engine(["a"])
    engine.add_gate(RecordingGate("pre", record), stage="pre")
    engine.add_gate(RecordingGate("post", record), stage="post")
    result = await engine.run(LoopContext(goal="g"))
    assert result.status is LoopStatus.COMPLETED
    assert len(threads) == 2 and loop_thread not in threads


async def test_tool_gates_run_in_the_runs_working_dir(tmp_path: Any) -> None:
    """A real subprocess gate sees the tree named by the run's initial context (or the step's metadata)."""
    import sys

    from loop_engine.gates import CommandGate

    check = [sys.executable, "-c", "import os, sys; sys.exit(0 if os.path.exists('ready') else 1)"]
    act, calls = counting_actor()
    engine = make_engine(["a"], act=act, config=LoopConfig(max_recovery_attempts=1))
    engine.add_gate(CommandGate(check, name="ready"), stage="pre")
    result = await engine.run(LoopContext(goal="g", initial_context={"working_dir": str(tmp_path)}))
    assert result.status is LoopStatus.FAILED and calls == []
    assert "pre-gate ready failed" in result.failures[0].message

    (tmp_path / "ready").write_text("")
    act, calls = counting_actor()
    engine = make_engine(["a"], act=act)
    engine.add_gate(CommandGate(check, name="ready"), stage="pre")
    result = await engine.run(LoopContext(goal="g", initial_context={"working_dir": str(tmp_path)}))
    assert result.status is LoopStatus.COMPLETED and calls == ["step_1"]


async def test_gate_files_come_from_step_metadata() -> None:
    gate = RecordingGate("files", lambda ctx: ctx.files == {"a.py": "x = 1\n"})
    engine = make_engine(["a"])
    engine.add_gate(gate, stage="pre")
    result = await engine.run(LoopContext(goal="g", initial_context={"files": {"a.py": "x = 1\n"}}))
    assert result.status is LoopStatus.COMPLETED and gate.seen[0].files == {"a.py": "x = 1\n"}
