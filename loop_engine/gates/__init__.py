"""Deterministic gates (Tutorial 3): catching problems before they reach a model."""

from .base import DeterministicGate, GateContext, GateResult, GateRunner, Severity, coerce_severity
from .budget import BudgetGate
from .presets import StandardGates
from .schema import SchemaGate
from .security import ALL_RULES, CODE_RULES, SECRET_RULES, Finding, SecurityGate
from .syntax import SUPPORTED_LANGUAGES, SyntaxGate
from .tools import INSTALL_HINTS, CommandGate, LintGate, TestGate, TypeCheckGate

__all__ = [
    "ALL_RULES",
    "CODE_RULES",
    "INSTALL_HINTS",
    "SECRET_RULES",
    "SUPPORTED_LANGUAGES",
    "BudgetGate",
    "CommandGate",
    "DeterministicGate",
    "Finding",
    "GateContext",
    "GateResult",
    "GateRunner",
    "LintGate",
    "SchemaGate",
    "SecurityGate",
    "Severity",
    "StandardGates",
    "SyntaxGate",
    "TestGate",
    "TypeCheckGate",
    "coerce_severity",
]
