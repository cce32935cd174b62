"""StandardGates: fresh, composable gate lists that work end to end with GateRunner."""

from __future__ import annotations

from loop_engine.gates import (
    BudgetGate,
    GateContext,
    GateRunner,
    LintGate,
    SchemaGate,
    SecurityGate,
    StandardGates,
    SyntaxGate,
    TestGate,
    TypeCheckGate,
)
from loop_engine.types import Budget


def test_presets_hold_the_expected_gates_and_are_fresh() -> None:
    assert [type(g) for g in StandardGates.pre_step()] == [BudgetGate]
    assert [type(g) for g in StandardGates.python_code()] == [SyntaxGate, SecurityGate]
    assert [type(g) for g in StandardGates.python_tools()] == [LintGate, TypeCheckGate, TestGate]
    assert [type(g) for g in StandardGates.json_output({"type": "object"})] == [SyntaxGate, SchemaGate]
    assert StandardGates.python_code()[0] is not StandardGates.python_code()[0]


def test_python_code_preset_stops_at_syntax_before_security() -> None:
    results = GateRunner(StandardGates.python_code()).run(GateContext(output="eval(x"))
    assert [r.gate_name for r in results] == ["syntax"] and not GateRunner.passed(results)
    results = GateRunner(StandardGates.python_code()).run(GateContext(output="eval(x)\n"))
    assert [(r.gate_name, r.passed) for r in results] == [("syntax", True), ("security", False)]


def test_json_output_preset_parses_then_validates() -> None:
    runner = GateRunner(StandardGates.json_output({"type": "object", "required": ["ok"]}))
    assert GateRunner.passed(runner.run(GateContext(output='{"ok": true}')))
    assert runner.run(GateContext(output="{}"))[-1].details["errors"][0]["validator"] == "required"


def test_python_tools_skip_option_and_pre_step_budget() -> None:
    assert all(g.skip_if_missing for g in StandardGates.python_tools(skip_if_missing=True))  # type: ignore[attr-defined]
    results = GateRunner(StandardGates.pre_step()).run(GateContext(budget=Budget(max_steps=1, steps_used=1)))
    assert not GateRunner.passed(results) and "steps" in results[0].message
