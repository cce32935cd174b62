"""BudgetGate: exhausted limits and estimates that would exceed them, named in the message."""

from __future__ import annotations

from typing import Any

import pytest

from loop_engine.gates import BudgetGate, GateContext, Severity
from loop_engine.errors import ConfigurationError
from loop_engine.types import Budget


def check(budget: Any, **estimates: Any) -> Any:
    return BudgetGate().check(GateContext(budget=budget, metadata=estimates))


def test_within_budget_passes_and_reports_remaining() -> None:
    result = check(Budget(max_tokens=100, tokens_used=10), estimated_tokens=90)
    assert result.passed and result.details["remaining"]["tokens"] == 90


def test_no_budget_means_no_limit() -> None:
    assert check(None).passed
    assert check(Budget(), estimated_cost=1e9, estimated_tokens=10**9).passed


@pytest.mark.parametrize(
    ("budget", "limit"),
    [
        (Budget(max_tokens=10, tokens_used=10), "tokens"),
        (Budget(max_cost=1.0, cost_used=1.5), "cost"),
        (Budget(max_steps=3, steps_used=3), "steps"),
        (Budget(max_time_seconds=60, time_used=61), "time_seconds"),
    ],
)
def test_exhausted_budget_fails_naming_the_limit(budget: Budget, limit: str) -> None:
    result = check(budget)
    assert not result.passed and result.blocks
    assert result.message.startswith(f"{limit} budget exhausted")
    assert result.details["violations"][0]["limit"] == limit


def test_estimate_that_would_exceed_fails() -> None:
    result = check(Budget(max_cost=1.0, cost_used=0.5), estimated_cost=0.6)
    assert not result.passed
    assert result.message == "cost budget would be exceeded: used 0.5 + estimated 0.6 > limit 1.0"
    tokens = check(Budget(max_tokens=100, tokens_used=50), estimated_tokens=51)
    assert not tokens.passed and "tokens" in tokens.message


def test_reaching_the_limit_exactly_is_allowed_even_with_float_error() -> None:
    assert check(Budget(max_cost=1.0, cost_used=0.5), estimated_cost=0.5).passed
    assert check(Budget(max_cost=0.3, cost_used=0.1), estimated_cost=0.2).passed  # 0.1 + 0.2 != 0.3 in floats


def test_every_violation_is_listed() -> None:
    result = check(Budget(max_tokens=10, tokens_used=10, max_cost=1.0), estimated_cost=2)
    assert [v["limit"] for v in result.details["violations"]] == ["tokens", "cost"]


@pytest.mark.parametrize("estimate", ["lots", -1, float("nan"), True, [1]])
def test_bad_estimates_fail_without_raising(estimate: Any) -> None:
    result = check(Budget(max_cost=1.0), estimated_cost=estimate)
    assert not result.passed and "estimated_cost" in result.message


def test_wrong_budget_type_and_garbage_limits_fail() -> None:
    assert "must be a loop_engine.types.Budget" in check({"max_cost": 1}).message
    with pytest.raises(ConfigurationError, match="Budget.max_cost must be a number or None"):
        Budget(max_cost="ten")  # type: ignore[arg-type]
    garbled = Budget()
    garbled.max_cost = "ten"  # type: ignore[assignment]  # changed after it was built
    assert not check(garbled).passed
    assert BudgetGate().check(GateContext(budget=Budget(), metadata=None)).passed  # type: ignore[arg-type]


def test_severity_configurable() -> None:
    result = BudgetGate(severity="warning").check(GateContext(budget=Budget(max_steps=0)))
    assert not result.passed and result.severity is Severity.WARNING and not result.blocks
