"""Ready-made gate lists for the common cases; combine them with ``+``.

Each preset returns a fresh list, so a caller may append to it or change a
gate without touching anyone else's configuration.
"""

from __future__ import annotations

from typing import Any

from .base import DeterministicGate
from .budget import BudgetGate
from .schema import SchemaGate
from .security import SecurityGate
from .syntax import SyntaxGate
from .tools import LintGate, TestGate, TypeCheckGate

__all__ = ["StandardGates"]


class StandardGates:
    """Factories, e.g. ``GateRunner(StandardGates.python_code() + StandardGates.python_tools())``."""

    @staticmethod
    def pre_step() -> list[DeterministicGate]:
        """Before the actor runs: is there budget left (including the step's estimates)?"""
        return [BudgetGate()]

    @staticmethod
    def python_code() -> list[DeterministicGate]:
        """Python in ``output``/``files``: it parses, then it leaks no secret and calls nothing dangerous."""
        return [SyntaxGate("python"), SecurityGate()]

    @staticmethod
    def python_tools(*, skip_if_missing: bool = False, timeout: float = 120.0) -> list[DeterministicGate]:
        """ruff, mypy and pytest on ``working_dir`` or ``files``; a missing tool fails unless skipped."""
        return [
            LintGate(skip_if_missing=skip_if_missing, timeout=timeout),
            TypeCheckGate(skip_if_missing=skip_if_missing, timeout=timeout),
            TestGate(skip_if_missing=skip_if_missing, timeout=timeout),
        ]

    @staticmethod
    def json_output(schema: dict[str, Any] | bool) -> list[DeterministicGate]:
        """Text output that must be JSON matching ``schema``."""
        return [SyntaxGate("json"), SchemaGate(schema, parse_json=True)]
