"""MODIFY's plan changes: one rule, asked by ``resume`` and by a vote path before the run resumes."""

from __future__ import annotations

from typing import Any

import pytest

from loop_engine.engine_decisions import plan_changes_problem
from loop_engine.errors import PlanValidationError
from loop_engine.review import HumanDecision
from loop_engine.types import Plan, Step

from .test_resume import answer, failing_engine, paused_at_failure

PLAN = Plan(steps=[Step(id="collect"), Step(id="apply", dependencies=["collect"])])


@pytest.mark.parametrize(("changes", "problem"), [
    ({"skip": ["aply"]}, "plan.skip names step(s) the run's plan does not have: aply; its steps: collect, apply"),
    ({"add": [{"id": "apply"}]}, "plan.add: a step 'apply' is already in the plan; its steps: collect, apply"),
    ({"add": [{"id": "n", "dependencies": ["mail"]}]},
     "plan.add: step 'n' depends on unknown step(s) mail; its steps: collect, apply"),
    ({"add": [{"id": "n"}, {"id": "n"}]}, "plan.add: a step 'n' is already in the plan; its steps: collect, apply, n"),
    # an added step depends on steps before it, so no change can make a cycle
    ({"add": [{"id": "n", "dependencies": ["n"]}]},
     "plan.add: step 'n' depends on unknown step(s) n; its steps: collect, apply"),
    ({"add": [{"id": "m", "dependencies": ["n"]}, {"id": "n", "dependencies": ["m"]}]},
     "plan.add: step 'm' depends on unknown step(s) n; its steps: collect, apply"),
    ({"skip": "apply"}, "modifications['plan']['skip'] must be a list of step ids, got 'apply'"),
])
def test_a_change_the_plan_cannot_take_is_named_with_the_plans_steps(changes: dict[str, Any], problem: str) -> None:
    assert plan_changes_problem(PLAN, changes) == problem


def test_changes_the_plan_can_take_are_no_problem() -> None:
    changes = {"skip": ["apply"], "add": [{"id": "n", "dependencies": ["apply"]}, {"id": "m", "dependencies": ["n"]}]}
    assert plan_changes_problem(PLAN, changes) is None


@pytest.mark.parametrize("changes", [
    {"skip": ["nope"]},
    {"add": [{"id": "step_1"}]},
    {"add": [{"id": "x", "dependencies": ["y"]}, {"id": "y"}]},
])
async def test_resume_refuses_with_the_rule_s_own_words(changes: dict[str, Any]) -> None:
    state = await paused_at_failure()
    assert state.current_plan is not None
    problem = plan_changes_problem(state.current_plan, changes)
    assert problem is not None
    with pytest.raises(PlanValidationError) as raised:
        await failing_engine().resume(state, answer(state, HumanDecision.MODIFY, modifications={"plan": changes}))
    assert str(raised.value) == problem
    assert state.decisions == [] and state.pending_review is not None
