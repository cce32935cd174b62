"""Is there budget left for this step? Checked before a model is paid to run it.

The gate looks at ``context.budget`` (a ``loop_engine.types.Budget``) and at
estimates the caller puts in ``context.metadata``: ``estimated_tokens``,
``estimated_cost``, ``estimated_steps``, ``estimated_time_seconds``. It fails
when a limit is already used up, or when used + estimate would go *over* it
(reaching the limit exactly is allowed). No budget means no limits: it passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..types import Budget
from .base import DeterministicGate, GateContext, GateResult, Severity

__all__ = ["ESTIMATE_KEYS", "BudgetGate"]


@dataclass(frozen=True)
class _Limit:
    label: str
    limit_attr: str
    used_attr: str
    estimate_key: str


_LIMITS = (
    _Limit("tokens", "max_tokens", "tokens_used", "estimated_tokens"),
    _Limit("cost", "max_cost", "cost_used", "estimated_cost"),
    _Limit("steps", "max_steps", "steps_used", "estimated_steps"),
    _Limit("time_seconds", "max_time_seconds", "time_used", "estimated_time_seconds"),
)

#: The ``context.metadata`` keys the gate reads estimates from.
ESTIMATE_KEYS = tuple(limit.estimate_key for limit in _LIMITS)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _exceeds(total: float, limit: float) -> bool:
    """Strictly over the limit, so 0.1 + 0.2 against a limit of 0.3 still fits."""
    return total > limit and not math.isclose(total, limit, rel_tol=1e-9, abs_tol=1e-12)


class BudgetGate(DeterministicGate):
    """Fails when the budget is exhausted or the step's estimate would exceed it."""

    name = "budget"

    def __init__(self, *, name: str | None = None, severity: str | Severity | None = None) -> None:
        super().__init__(name=name, severity=severity)

    def check(self, context: GateContext) -> GateResult:
        budget = context.budget
        if budget is None:
            return self.result(True, "no budget set: nothing limits this step", violations=[])
        if not isinstance(budget, Budget):
            return self.result(
                False,
                f"context.budget must be a loop_engine.types.Budget, got {type(budget).__name__}",
                violations=[],
            )
        metadata = context.metadata if isinstance(context.metadata, dict) else {}
        violations: list[dict[str, Any]] = []
        problems: list[str] = []
        for spec in _LIMITS:
            limit = getattr(budget, spec.limit_attr)
            used = getattr(budget, spec.used_attr)
            estimate = metadata.get(spec.estimate_key)
            if estimate is not None and (not _is_number(estimate) or estimate < 0):
                problems.append(f"metadata[{spec.estimate_key!r}] must be a non-negative number, got {estimate!r}")
                continue
            if limit is None:
                continue
            if not _is_number(limit) or not _is_number(used):
                problems.append(f"budget {spec.limit_attr}={limit!r} / {spec.used_attr}={used!r} are not numbers")
                continue
            if used >= limit:
                reason = f"{spec.label} budget exhausted: used {used} of {limit}"
            elif estimate is not None and _exceeds(used + estimate, limit):
                reason = f"{spec.label} budget would be exceeded: used {used} + estimated {estimate} > limit {limit}"
            else:
                continue
            violations.append(
                {"limit": spec.label, "max": limit, "used": used, "estimated": estimate, "reason": reason}
            )
        if problems:
            return self.result(False, f"cannot check budget: {problems[0]}", violations=violations, problems=problems)
        if violations:
            return self.result(False, violations[0]["reason"], violations=violations)
        return self.result(True, "within budget", violations=[], remaining=budget.remaining())
