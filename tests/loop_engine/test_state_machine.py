"""The transition table, checked transitions and the two derived statuses."""

from __future__ import annotations

import itertools

import pytest

from loop_engine.errors import InvalidTransitionError
from loop_engine.state_machine import (
    DECISION_TARGETS,
    TRANSITIONS,
    can_transition,
    derive_result_status,
    state_status_for,
    transition,
)
from loop_engine.types import ExecutionState as S
from loop_engine.types import LoopState, LoopStatus

ALL_PAIRS = list(itertools.product(S, S))


def test_table_has_a_row_for_every_state() -> None:
    assert set(TRANSITIONS) == set(S)


@pytest.mark.parametrize(("source", "target"), ALL_PAIRS, ids=[f"{a.value}->{b.value}" for a, b in ALL_PAIRS])
def test_every_pair_is_allowed_exactly_when_the_table_says(source: S, target: S) -> None:
    state = LoopState(execution_state=source)
    if target in TRANSITIONS[source]:
        transition(state, target)
        assert state.execution_state is target
        assert state.transitions == [(source.value, target.value)]
        assert state.status is state_status_for(target)
    else:
        with pytest.raises(InvalidTransitionError, match=f"{source!r} -> {target!r}"):
            transition(state, target)
        assert state.execution_state is source and state.transitions == []


@pytest.mark.parametrize("terminal", [s for s in S if s.is_terminal])
def test_terminal_states_are_immutable(terminal: S) -> None:
    assert TRANSITIONS[terminal] == frozenset()
    assert not any(can_transition(terminal, t) for t in S)


def test_every_non_terminal_state_can_reach_a_terminal_state() -> None:
    for start in (s for s in S if not s.is_terminal):
        seen, frontier = {start}, [start]
        while frontier:
            for nxt in TRANSITIONS[frontier.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        assert any(s.is_terminal for s in seen), start


def test_decision_points_reach_every_verdict() -> None:
    for point in (S.PLANNING, S.ITERATION_COMPLETE, S.WAITING_FOR_HUMAN):
        assert TRANSITIONS[point] >= DECISION_TARGETS


STATUS_TABLE = [
    (S.COMPLETED, LoopStatus.COMPLETED, LoopStatus.COMPLETED),
    (S.PARTIALLY_COMPLETED, LoopStatus.COMPLETED, LoopStatus.COMPLETED),
    (S.POLICY_TERMINATED, LoopStatus.TERMINATED, LoopStatus.COMPLETED),
    (S.BUDGET_EXHAUSTED, LoopStatus.TERMINATED, LoopStatus.FAILED),
    (S.FAILED, LoopStatus.FAILED, LoopStatus.FAILED),
    (S.ABSTAINED, LoopStatus.FAILED, LoopStatus.FAILED),
    (S.WAITING_FOR_HUMAN, LoopStatus.PAUSED, LoopStatus.PAUSED),
    (S.ACTING, LoopStatus.RUNNING, LoopStatus.RUNNING),
    (S.RECOVERING, LoopStatus.RECOVERING, LoopStatus.RUNNING),
    (S.INITIALIZED, LoopStatus.PENDING, LoopStatus.RUNNING),
]


@pytest.mark.parametrize(("execution_state", "state_status", "result_status"), STATUS_TABLE)
def test_statuses_derive_from_the_execution_state(
    execution_state: S, state_status: LoopStatus, result_status: LoopStatus
) -> None:
    assert state_status_for(execution_state) is state_status
    assert derive_result_status(LoopState(execution_state=execution_state)) is result_status
