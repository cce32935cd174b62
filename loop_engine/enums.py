"""The enums of a loop: statuses, states, strategies and component kinds.

Kept apart from the data classes in ``loop_engine.types`` (which re-exports
every name here, as the reference does) so each module stays readable.
"""

from __future__ import annotations

from enum import Enum, auto

__all__ = [
    "LoopStatus",
    "ExecutionState",
    "TERMINAL_EXECUTION_STATES",
    "StepStatus",
    "COMPLETION_STATES",
    "RUNNABLE_STATES",
    "FailureType",
    "FailureStatus",
    "RecoveryStrategy",
    "ComponentType",
]


class LoopStatus(Enum):
    """Why a run is where it is (``LoopState``) or how it ended (``LoopResult``)."""

    PENDING = auto()
    RUNNING = auto()
    PAUSED = auto()
    COMPLETED = auto()
    FAILED = auto()
    TERMINATED = auto()
    RECOVERING = auto()


class ExecutionState(Enum):
    """The engine's state machine; the legal moves live in ``state_machine``."""

    INITIALIZED = "initialized"
    PLANNING = "planning"
    ACTING = "acting"
    OBSERVING = "observing"
    EVALUATING = "evaluating"
    VERIFYING = "verifying"
    ITERATION_COMPLETE = "iteration_complete"
    RECOVERING = "recovering"
    REPLANNING = "replanning"
    WAITING_FOR_HUMAN = "waiting_for_human"
    COMPLETED = "completed"
    PARTIALLY_COMPLETED = "partially_completed"
    ABSTAINED = "abstained"
    BUDGET_EXHAUSTED = "budget_exhausted"
    POLICY_TERMINATED = "policy_terminated"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_EXECUTION_STATES


TERMINAL_EXECUTION_STATES = frozenset(
    {
        ExecutionState.COMPLETED,
        ExecutionState.PARTIALLY_COMPLETED,
        ExecutionState.ABSTAINED,
        ExecutionState.BUDGET_EXHAUSTED,
        ExecutionState.POLICY_TERMINATED,
        ExecutionState.FAILED,
    }
)


class StepStatus(Enum):
    """A step's lifecycle; only VERIFIED_COMPLETED and SKIPPED count as done."""

    PENDING = "pending"
    READY = "ready"
    BLOCKED = "blocked"
    IN_PROGRESS = "in_progress"
    EXECUTED = "executed"
    EVALUATION_FAILED = "evaluation_failed"
    EVALUATED = "evaluated"
    VERIFICATION_FAILED = "verification_failed"
    VERIFIED_COMPLETED = "verified_completed"
    RECOVERY_PENDING = "recovery_pending"
    RETRY_PENDING = "retry_pending"
    SKIPPED = "skipped"
    FAILED = "failed"
    CANCELLED = "cancelled"


COMPLETION_STATES = frozenset({StepStatus.VERIFIED_COMPLETED, StepStatus.SKIPPED})

#: Statuses from which a step may be picked to run (again).
RUNNABLE_STATES = frozenset({StepStatus.PENDING, StepStatus.READY, StepStatus.RETRY_PENDING})


class FailureType(Enum):
    TIMEOUT = "timeout"
    BUDGET_EXCEEDED = "budget_exceeded"
    INVALID_OUTPUT = "invalid_output"
    VERIFICATION_FAILED = "verification_failed"
    SEMANTIC_DRIFT = "semantic_drift"
    EXECUTION_ERROR = "execution_error"
    PLANNING_FAILURE = "planning_failure"
    GOAL_HIJACKING = "goal_hijacking"
    RECOVERY_EXHAUSTED = "recovery_exhausted"


class FailureStatus(Enum):
    UNHANDLED = "unhandled"
    RECOVERY_PLANNED = "recovery_planned"
    RECOVERY_IN_PROGRESS = "recovery_in_progress"
    RECOVERED = "recovered"
    RECOVERY_FAILED = "recovery_failed"
    ESCALATED = "escalated"
    TERMINAL = "terminal"


class RecoveryStrategy(Enum):
    RETRY = "retry"
    BACKOFF = "backoff"
    PLAN_REVISION = "plan_revision"
    HUMAN_HANDOFF = "human_handoff"
    GRACEFUL_DEGRADATION = "graceful_degradation"
    CIRCUIT_BREAK = "circuit_break"


class ComponentType(Enum):
    PLANNER = "planner"
    ACTOR = "actor"
    OBSERVER = "observer"
    EVALUATOR = "evaluator"
    RECOVERY = "recovery"
    TERMINATOR = "terminator"
    VERIFIER = "verifier"
