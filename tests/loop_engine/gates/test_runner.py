"""GateRunner ordering and stopping, plus the base contract (severity, results)."""

from __future__ import annotations

import json

import pytest

from loop_engine.errors import ConfigurationError
from loop_engine.gates import DeterministicGate, GateContext, GateResult, GateRunner, Severity


class Recording(DeterministicGate):
    """A gate with a fixed verdict that records that it ran."""

    def __init__(self, name: str, passed: bool, calls: list[str], severity: str = Severity.ERROR) -> None:
        super().__init__(name=name, severity=severity)
        self.passed = passed
        self.calls = calls

    def check(self, context: GateContext) -> GateResult:
        self.calls.append(self.name)
        return self.result(self.passed, f"{self.name} says {self.passed}")


class ReturnsGarbage(DeterministicGate):
    name = "garbage"

    def check(self, context: GateContext) -> GateResult:
        return "ok"  # type: ignore[return-value]


class Raises(DeterministicGate):
    name = "raises"

    def check(self, context: GateContext) -> GateResult:
        raise KeyError("bug in the gate")


def test_runs_in_order_and_returns_every_result() -> None:
    calls: list[str] = []
    runner = GateRunner([Recording("a", True, calls), Recording("b", True, calls)]).add(Recording("c", True, calls))
    results = runner.run(GateContext())
    assert calls == ["a", "b", "c"]
    assert [r.gate_name for r in results] == ["a", "b", "c"]
    assert GateRunner.passed(results)
    assert GateRunner.first_blocking(results) is None
    assert len(runner) == 3


def test_stops_at_first_error_failure_and_keeps_results_so_far() -> None:
    calls: list[str] = []
    runner = GateRunner([Recording("a", True, calls), Recording("b", False, calls), Recording("c", True, calls)])
    results = runner.run(GateContext())
    assert calls == ["a", "b"]
    assert [(r.gate_name, r.passed) for r in results] == [("a", True), ("b", False)]
    assert not GateRunner.passed(results)
    assert GateRunner.first_blocking(results) is results[1]


@pytest.mark.parametrize("severity", [Severity.WARNING, Severity.INFO, "warning"])
def test_non_error_failures_do_not_stop_the_runner(severity: str) -> None:
    calls: list[str] = []
    runner = GateRunner([Recording("warn", False, calls, severity=severity), Recording("next", True, calls)])
    results = runner.run(GateContext())
    assert calls == ["warn", "next"]
    assert results[0].passed is False and results[0].severity == Severity(severity)
    assert not results[0].blocks
    assert GateRunner.passed(results)


def test_empty_runner_passes() -> None:
    assert GateRunner().run(GateContext()) == []
    assert GateRunner.passed([])


def test_a_gate_returning_garbage_blocks_with_its_name() -> None:
    calls: list[str] = []
    results = GateRunner([ReturnsGarbage(), Recording("after", True, calls)]).run(GateContext())
    assert calls == []
    assert len(results) == 1 and results[0].blocks
    assert "garbage" in results[0].message and "str" in results[0].message


def test_a_gate_that_raises_propagates() -> None:
    with pytest.raises(KeyError, match="bug in the gate"):
        GateRunner([Raises()]).run(GateContext())


def test_severity_is_configurable_and_validated() -> None:
    calls: list[str] = []
    assert Recording("x", False, calls, severity="info").result(False).severity is Severity.INFO
    with pytest.raises(ConfigurationError, match=r"unknown gate severity 'fatal'.*'error'"):
        Recording("x", False, calls, severity="fatal")
    with pytest.raises(ConfigurationError, match="non-empty string"):
        Recording("", False, calls)


def test_class_defaults_apply_without_super_init() -> None:
    class Bare(DeterministicGate):
        def check(self, context: GateContext) -> GateResult:
            return self.result(True)

    result = Bare().check(GateContext())
    assert (result.gate_name, result.severity) == ("gate", Severity.ERROR)


def test_result_is_json_ready_and_severity_compares_to_text() -> None:
    result = GateResult(False, "g", "msg", {"line": 3}, "warning")
    assert result.severity == "warning" and result.severity is Severity.WARNING
    assert json.loads(json.dumps(result.to_dict())) == {
        "passed": False,
        "gate_name": "g",
        "message": "msg",
        "details": {"line": 3},
        "severity": "warning",
    }
    assert GateResult(False, "g").blocks
