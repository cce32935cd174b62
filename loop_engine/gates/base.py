"""The gate contract: deterministic checks that run before and after a step.

Gates catch problems a program can catch (bad syntax, wrong schema, a blown
budget, a leaked secret) before any model or human has to look at them.
A gate never raises for bad input: whatever it is given, it answers with a
``GateResult``. Only a misconfigured gate raises, at construction, with a
``ConfigurationError`` that says how to fix the configuration.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..errors import ConfigurationError

__all__ = ["DeterministicGate", "GateContext", "GateResult", "GateRunner", "Severity", "coerce_severity"]


class Severity(StrEnum):
    """How much a failure matters; only ``ERROR`` stops a ``GateRunner`` and fails the step.

    A ``StrEnum`` so that ``result.severity == "error"`` keeps working and the
    value serialises as plain JSON text.
    """

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def coerce_severity(value: str | Severity) -> Severity:
    """Turn a severity name into a ``Severity`` or refuse it with the valid choices."""
    try:
        return Severity(value)
    except ValueError:
        choices = ", ".join(repr(s.value) for s in Severity)
        raise ConfigurationError(f"unknown gate severity {value!r}; use one of {choices}") from None


@dataclass
class GateResult:
    """One gate's verdict; ``details`` holds JSON values so it can be recorded in a Failure."""

    passed: bool
    gate_name: str
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    severity: str = Severity.ERROR

    def __post_init__(self) -> None:
        # Keep the field a Severity when it names one, so comparisons and JSON agree.
        if self.severity in {s.value for s in Severity}:
            self.severity = Severity(self.severity)

    @property
    def blocks(self) -> bool:
        """A failed error-severity result stops the step."""
        return not self.passed and self.severity == Severity.ERROR

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, e.g. for a Failure's ``evidence``."""
        return {
            "passed": self.passed,
            "gate_name": self.gate_name,
            "message": self.message,
            "details": self.details,
            "severity": str(self.severity),
        }


@dataclass
class GateContext:
    """What a gate may look at: the output under test and where it came from.

    ``files`` maps relative paths to file text; ``working_dir`` is a directory
    the tool gates may run in; ``budget`` is a ``loop_engine.types.Budget``.
    """

    output: Any = None
    step_id: str | None = None
    step_description: str = ""
    files: dict[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    budget: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)


class DeterministicGate(abc.ABC):
    """One check. Subclasses implement ``check``; ``name`` labels results.

    Subclasses that take options call ``super().__init__(name=..., severity=...)``
    so that every gate's name and severity are configurable the same way;
    subclasses that don't still get the class-level defaults.
    """

    name: str = "gate"
    severity: Severity = Severity.ERROR

    def __init__(self, *, name: str | None = None, severity: str | Severity | None = None) -> None:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"gate name must be a non-empty string, got {name!r}")
            self.name = name
        if severity is not None:
            self.severity = coerce_severity(severity)

    @abc.abstractmethod
    def check(self, context: GateContext) -> GateResult:
        """Return a result; never raise for a failing input."""

    def result(self, passed: bool, message: str = "", **details: Any) -> GateResult:
        """A result stamped with this gate's name and severity, so subclasses cannot mislabel one."""
        return GateResult(passed=passed, gate_name=self.name, message=message, details=details, severity=self.severity)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, severity={str(self.severity)!r})"


class GateRunner:
    """Runs gates in order and stops at the first failing error-severity gate.

    A gate that raises is a bug in that gate, so the exception propagates to the
    caller (the engine records it as a Failure at its component boundary).
    A gate that returns something other than a ``GateResult`` is reported as a
    blocking result naming the gate, because nothing could be checked.
    """

    def __init__(self, gates: list[DeterministicGate] | None = None) -> None:
        self.gates: list[DeterministicGate] = list(gates or [])

    def add(self, gate: DeterministicGate) -> GateRunner:
        self.gates.append(gate)
        return self

    def __len__(self) -> int:
        return len(self.gates)

    def run(self, context: GateContext) -> list[GateResult]:
        """Every result up to and including the first blocking one."""
        results: list[GateResult] = []
        for gate in self.gates:
            result = gate.check(context)
            if not isinstance(result, GateResult):
                gate_name = getattr(gate, "name", type(gate).__name__)
                result = GateResult(
                    passed=False,
                    gate_name=gate_name,
                    message=(
                        f"gate {gate_name!r} returned {type(result).__name__}, not a GateResult; "
                        "fix its check() to return GateResult"
                    ),
                    severity=Severity.ERROR,
                )
            results.append(result)
            if result.blocks:
                break
        return results

    @staticmethod
    def passed(results: list[GateResult]) -> bool:
        return not any(r.blocks for r in results)

    @staticmethod
    def first_blocking(results: list[GateResult]) -> GateResult | None:
        """The result that stopped the run, if any; what a Failure should quote."""
        return next((r for r in results if r.blocks), None)
