"""The engine's state machine: the one table of legal moves, and the checks.

Every change of ``LoopState.execution_state`` goes through ``transition``,
which refuses a move the table lacks and records the ones it makes in
``state.transitions``; terminal states have no way out. The two statuses
(``LoopState.status``, why the run stands where it does, and
``LoopResult.status``, the verdict) are pure functions of the execution
state here, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from .errors import InvalidTransitionError
from .types import ExecutionState as S
from .types import LoopState, LoopStatus

__all__ = [
    "TRANSITIONS",
    "DECISION_TARGETS",
    "IN_ITERATION_STATES",
    "can_transition",
    "transition",
    "state_status_for",
    "derive_result_status",
]

#: Where a run can go from a decision point (after planning, at an iteration
#: boundary, after a human decision): the next step, a terminal verdict, or a pause.
DECISION_TARGETS: frozenset[S] = frozenset(
    {
        S.ACTING,
        S.COMPLETED,
        S.PARTIALLY_COMPLETED,
        S.POLICY_TERMINATED,
        S.BUDGET_EXHAUSTED,
        S.FAILED,
        S.WAITING_FOR_HUMAN,
    }
)

#: States inside one iteration. A snapshot taken in one of them means the
#: process died mid-iteration; ``resume`` abandons that iteration through the
#: edge to ITERATION_COMPLETE and runs the step again.
IN_ITERATION_STATES: frozenset[S] = frozenset(
    {S.ACTING, S.OBSERVING, S.EVALUATING, S.VERIFYING, S.RECOVERING, S.REPLANNING}
)

_STEP_FAILS = frozenset({S.RECOVERING, S.ITERATION_COMPLETE})

TRANSITIONS: Mapping[S, frozenset[S]] = {
    S.INITIALIZED: frozenset({S.PLANNING}),
    # A planner failure is not retried by recovery: it ends the run or asks a human.
    S.PLANNING: DECISION_TARGETS,
    S.ACTING: frozenset({S.OBSERVING}) | _STEP_FAILS,
    S.OBSERVING: frozenset({S.EVALUATING, S.VERIFYING}) | _STEP_FAILS,
    S.EVALUATING: frozenset({S.VERIFYING}) | _STEP_FAILS,
    S.VERIFYING: _STEP_FAILS,
    S.ITERATION_COMPLETE: DECISION_TARGETS,
    S.RECOVERING: frozenset({S.ITERATION_COMPLETE, S.REPLANNING, S.WAITING_FOR_HUMAN, S.FAILED}),
    S.REPLANNING: frozenset({S.ITERATION_COMPLETE, S.WAITING_FOR_HUMAN, S.FAILED}),
    # After a decision: carry on (decision targets) or plan again when no plan exists yet.
    S.WAITING_FOR_HUMAN: DECISION_TARGETS | {S.PLANNING},
    **{terminal: frozenset() for terminal in S if terminal.is_terminal},
}


def can_transition(source: S, target: S) -> bool:
    return target in TRANSITIONS[source]


def transition(state: LoopState, target: S, *, now: datetime | None = None) -> None:
    """Move ``state`` to ``target`` or raise ``InvalidTransitionError``.

    Also keeps ``state.status`` in step, so a stopped run never says RUNNING.
    """
    source = state.execution_state
    if not can_transition(source, target):
        raise InvalidTransitionError(source, target)
    state.execution_state = target
    state.transitions.append((source.value, target.value))
    state.status = state_status_for(target)
    state.updated_at = now or datetime.now()


def state_status_for(execution_state: S) -> LoopStatus:
    """``LoopState.status`` for an execution state: why the run stands there.

    TERMINATED covers both a terminator firing and a limit (budget, max
    iterations) stopping the run; ``state.stop_reason`` says which.
    """
    if execution_state in (S.COMPLETED, S.PARTIALLY_COMPLETED):
        return LoopStatus.COMPLETED
    if execution_state in (S.POLICY_TERMINATED, S.BUDGET_EXHAUSTED):
        return LoopStatus.TERMINATED
    if execution_state in (S.FAILED, S.ABSTAINED):
        return LoopStatus.FAILED
    if execution_state is S.WAITING_FOR_HUMAN:
        return LoopStatus.PAUSED
    if execution_state in (S.RECOVERING, S.REPLANNING):
        return LoopStatus.RECOVERING
    if execution_state is S.INITIALIZED:
        return LoopStatus.PENDING
    return LoopStatus.RUNNING


def derive_result_status(state: LoopState) -> LoopStatus:
    """``LoopResult.status``: COMPLETED when the plan completed (even partially)
    or a terminator fired, PAUSED while a human is asked, FAILED otherwise.

    A run that has not stopped (only seen if someone asks mid-run) is RUNNING.
    """
    execution_state = state.execution_state
    if execution_state in (S.COMPLETED, S.PARTIALLY_COMPLETED, S.POLICY_TERMINATED):
        return LoopStatus.COMPLETED
    if execution_state is S.WAITING_FOR_HUMAN:
        return LoopStatus.PAUSED
    if execution_state.is_terminal:
        return LoopStatus.FAILED
    return LoopStatus.RUNNING
