"""The gate contract: deterministic checks that run before and after a step.

Gates catch problems a program can catch (bad syntax, wrong schema, a blown
budget, a leaked secret) before any model or human has to look at them.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Severity", "GateResult", "GateContext", "DeterministicGate", "GateRunner"]


class Severity:
    """Severity names; ``ERROR`` stops a ``GateRunner`` and fails the step."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@dataclass
class GateResult:
    passed: bool
    gate_name: str
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    severity: str = Severity.ERROR

    @property
    def blocks(self) -> bool:
        """A failed error-severity result stops the step."""
        return not self.passed and self.severity == Severity.ERROR


@dataclass
class GateContext:
    """What a gate may look at: the output under test and where it came from."""

    output: Any = None
    step_id: str | None = None
    step_description: str = ""
    files: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    budget: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


class DeterministicGate(abc.ABC):
    """One check. Subclasses implement ``check``; ``name`` labels results."""

    name: str = "gate"
    severity: str = Severity.ERROR

    @abc.abstractmethod
    def check(self, context: GateContext) -> GateResult:
        """Return a result; never raise for a failing input."""

    def result(self, passed: bool, message: str = "", **details: Any) -> GateResult:
        return GateResult(passed=passed, gate_name=self.name, message=message, details=details, severity=self.severity)


class GateRunner:
    """Runs gates in order and stops at the first failing error-severity gate."""

    def __init__(self, gates: list[DeterministicGate] | None = None) -> None:
        self.gates: list[DeterministicGate] = list(gates or [])

    def add(self, gate: DeterministicGate) -> GateRunner:
        self.gates.append(gate)
        return self

    def run(self, context: GateContext) -> list[GateResult]:
        """Every result up to and including the first blocking one."""
        results: list[GateResult] = []
        for gate in self.gates:
            result = gate.check(context)
            results.append(result)
            if result.blocks:
                break
        return results

    @staticmethod
    def passed(results: list[GateResult]) -> bool:
        return not any(r.blocks for r in results)
