"""A modify vote is judged by the engine's own rules when it is cast, not when the run resumes."""

from __future__ import annotations

import pytest

from adapters.modify_changes import modification_problem, parse_assignments


@pytest.mark.parametrize(
    ("assignments", "problem"),
    [
        (["step.descripton=x"], "modifications['step'] cannot change ['descripton']"),
        (["step.metadata=5"], "modifications['step']['metadata'] must be a dict"),
        (["plan.skipp=[1]"], "modifications['plan'] must be {'skip': [step ids], 'add': [steps]}"),
        (["plan.skip=apply"], "modifications['plan']['skip'] must be a list of step ids, got 'apply'"),
        (['plan.add=[{"description": "no id"}]'], "an added step needs at least a string 'id'"),
        (['plan.add=[{"id": "s9", "dependencies": "s1"}]'], "added step 's9': dependencies must be a list"),
        (["note=x"], "modify cannot change 'note'"),
    ],
)
def test_changes_the_engine_would_refuse_are_refused_when_voting(assignments: list[str], problem: str) -> None:
    found = modification_problem(parse_assignments(assignments))
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "assignments",
    [
        ["context.note=x"],
        ['plan.skip=["s2"]'],
        ['plan.add=[{"id": "s9", "dependencies": ["s1"]}]'],
        ["step.output=42", "step.metadata.by=ann"],
    ],
)
def test_changes_the_engine_takes_pass(assignments: list[str]) -> None:
    assert modification_problem(parse_assignments(assignments)) is None
