"""The vocabulary of a loop: the data classes every other module shares,
and (re-exported from ``loop_engine.enums``) its enums.

Names follow the reference ``loop_engine`` so tutorial code runs unchanged.
Everything here is plain data: behaviour that needs the engine lives in the
engine, serialisation in ``loop_engine.serialization``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .enums import (
    COMPLETION_STATES,
    RUNNABLE_STATES,
    TERMINAL_EXECUTION_STATES,
    ComponentType,
    ExecutionState,
    FailureStatus,
    FailureType,
    LoopStatus,
    RecoveryStrategy,
    StepStatus,
)
from .errors import ConfigurationError, PlanValidationError
from .ids import new_id

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .review import ReviewRequest, ReviewResponse

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
    "Step",
    "Plan",
    "Observation",
    "Evaluation",
    "Failure",
    "RecoveryAction",
    "Budget",
    "LoopContext",
    "LoopResult",
    "LoopState",
]


@dataclass
class Step:
    """One unit of work in a plan.

    ``output`` must be a JSON value (dict, list, str, number, bool, None) for
    the state to be saved as JSON; persistence refuses anything else by name.
    """

    id: str = field(default_factory=new_id)
    description: str = ""
    dependencies: list[str] = field(default_factory=list)
    status: StepStatus = StepStatus.PENDING
    output: Any = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    evaluation_passed: bool | None = None
    verification_passed: bool | None = None
    attempts: int = 0

    def is_completed(self) -> bool:
        return self.status in COMPLETION_STATES


@dataclass
class Plan:
    id: str = field(default_factory=new_id)
    goal: str = ""
    steps: list[Step] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=datetime.now)
    version: int = 1

    def get_step(self, step_id: str) -> Step | None:
        return next((s for s in self.steps if s.id == step_id), None)

    def get_next_step(self) -> Step | None:
        """The first runnable step whose dependencies are all done."""
        done = {s.id for s in self.steps if s.is_completed()}
        for step in self.steps:
            if step.status in RUNNABLE_STATES and all(d in done for d in step.dependencies):
                return step
        return None

    def get_progress(self) -> float:
        if not self.steps:
            return 0.0
        return sum(1 for s in self.steps if s.is_completed()) / len(self.steps)

    def is_complete(self) -> bool:
        return bool(self.steps) and all(s.is_completed() for s in self.steps)

    def check_shape(self) -> None:
        """The structural half of ``validate``: every step a ``Step`` with a string id,
        a ``StepStatus`` and a list of string dependencies (which may still name
        ids about to be rewritten, as a plan revision does)."""
        if not isinstance(self.steps, list):
            kind = type(self.steps).__name__
            raise PlanValidationError(f"plan {self.id!r}: steps must be a list of Step, got {kind}")
        for index, step in enumerate(self.steps):
            _check_step_shape(self.id, index, step)

    def validate(self) -> None:
        """Refuse what would break a run later, far from its cause: steps that are
        not ``Step``s, statuses that are not ``StepStatus`` members, duplicate
        ids and dependencies on ids the plan lacks."""
        self.check_shape()
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise PlanValidationError(
                    f"plan {self.id!r} has two steps with id {step.id!r}; give every step a unique id"
                )
            seen.add(step.id)
        for step in self.steps:
            unknown = [d for d in step.dependencies if d not in seen]
            if unknown:
                raise PlanValidationError(
                    f"step {step.id!r} depends on unknown step id(s) {unknown}; "
                    f"known ids are {sorted(seen)} - fix the dependency list or add the missing steps"
                )


def _check_step_shape(plan_id: str, index: int, step: Any) -> None:
    where = f"plan {plan_id!r} step {index}"
    if not isinstance(step, Step):
        raise PlanValidationError(
            f"{where} is a {type(step).__name__}, not a Step; build it as Step(id=..., description=...)"
        )
    if not isinstance(step.id, str) or not step.id:
        raise PlanValidationError(f"{where} has id {step.id!r}; step ids are non-empty strings")
    if not isinstance(step.status, StepStatus):
        raise PlanValidationError(
            f"step {step.id!r} has status {step.status!r}; use a StepStatus member, e.g. StepStatus.PENDING"
        )
    if not isinstance(step.metadata, dict):
        raise PlanValidationError(f"step {step.id!r} has metadata {step.metadata!r}; use a dict (or leave it out)")
    deps = step.dependencies
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise PlanValidationError(
            f"step {step.id!r} has dependencies {deps!r}; use a list of step ids, e.g. ['step_1'] (or [])"
        )


@dataclass
class Observation:
    timestamp: datetime = field(default_factory=datetime.now)
    content: Any = None
    source: str = "unknown"
    step_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Evaluation:
    score: float = 0.0
    passed: bool = False
    feedback: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=datetime.now)
    step_id: str | None = None


@dataclass
class Failure:
    """One problem, however many attempts it takes to recover from it."""

    type: FailureType = FailureType.EXECUTION_ERROR
    message: str = ""
    step_id: str | None = None
    recoverable: bool = True
    context: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=datetime.now)
    failure_id: str = field(default_factory=new_id)
    status: FailureStatus = FailureStatus.UNHANDLED
    recovery_attempts: int = 0
    max_recovery_attempts: int = 3
    recovery_action_ids: list[str] = field(default_factory=list)
    source_component: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def is_open(self) -> bool:
        """Still a live problem: neither recovered nor given up on."""
        return self.status not in (FailureStatus.RECOVERED, FailureStatus.TERMINAL, FailureStatus.RECOVERY_FAILED)

    def can_recover(self) -> bool:
        if not self.recoverable:
            return False
        if self.status in (FailureStatus.TERMINAL, FailureStatus.RECOVERY_FAILED, FailureStatus.RECOVERED):
            return False
        return self.recovery_attempts < self.max_recovery_attempts

    def record_recovery_attempt(self, action_id: str) -> None:
        """Count an attempt; the failure stays open until the retried work passes."""
        self.recovery_attempts += 1
        self.recovery_action_ids.append(action_id)
        self.status = FailureStatus.RECOVERY_IN_PROGRESS

    def mark_recovered(self) -> None:
        self.status = FailureStatus.RECOVERED
        self.recoverable = False

    def mark_terminal(self) -> None:
        self.status = FailureStatus.TERMINAL
        self.recoverable = False


@dataclass
class RecoveryAction:
    strategy: RecoveryStrategy = RecoveryStrategy.RETRY
    params: dict[str, Any] = field(default_factory=dict)
    estimated_success: float = 0.5
    action_id: str = field(default_factory=new_id)
    failure_id: str | None = None
    timestamp: datetime = field(default_factory=datetime.now)
    executed: bool = False
    success: bool | None = None
    reason: str = ""


@dataclass
class Budget:
    """Limits (``max_*``; None = unlimited) and what has been used of them."""

    max_tokens: int | None = None
    max_steps: int | None = None
    max_time_seconds: float | None = None
    max_cost: float | None = None
    tokens_used: int = 0
    steps_used: int = 0
    time_used: float = 0.0
    cost_used: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Limits and usage are numbers (limits may be None), so comparisons never fail mid-run."""
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None and item.name.startswith("max_"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                unlimited = " or None for no limit" if item.name.startswith("max_") else ""
                raise ConfigurationError(f"Budget.{item.name} must be a number{unlimited}, got {value!r}")
            if value < 0:
                raise ConfigurationError(f"Budget.{item.name}={value!r} cannot be negative")

    def exhausted_reason(self) -> str | None:
        """Which limit is used up, in words, or None while within every limit."""
        for limit, used, name in (
            (self.max_tokens, self.tokens_used, "tokens"),
            (self.max_steps, self.steps_used, "steps"),
            (self.max_time_seconds, self.time_used, "time_seconds"),
            (self.max_cost, self.cost_used, "cost"),
        ):
            if limit is not None and used >= limit:
                return f"budget exhausted: {name} used {used} of {limit}"
        return None

    def check_budget(self) -> bool:
        return self.exhausted_reason() is None

    def remaining(self) -> dict[str, float | None]:
        return {
            "tokens": None if self.max_tokens is None else self.max_tokens - self.tokens_used,
            "steps": None if self.max_steps is None else self.max_steps - self.steps_used,
            "time": None if self.max_time_seconds is None else self.max_time_seconds - self.time_used,
            "cost": None if self.max_cost is None else self.max_cost - self.cost_used,
        }


@dataclass
class LoopContext:
    """What a run is for: the goal, its inputs (JSON values) and its budget."""

    goal: str = ""
    initial_context: dict[str, Any] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Checked when built and again when a run starts, in case it was changed since."""
        if not isinstance(self.goal, str):
            raise ConfigurationError(f"LoopContext.goal must be a string, got {type(self.goal).__name__}")
        for name in ("initial_context", "metadata"):
            if not isinstance(getattr(self, name), dict):
                raise ConfigurationError(
                    f"LoopContext.{name} must be a dict, got {type(getattr(self, name)).__name__}"
                )
        if not isinstance(self.budget, Budget):
            raise ConfigurationError(
                f"LoopContext.budget must be a Budget, got {type(self.budget).__name__}; "
                "use Budget(max_steps=..., max_cost=...)"
            )
        self.budget.validate()


@dataclass
class LoopResult:
    """The derived verdict of a run: COMPLETED, FAILED or PAUSED."""

    status: LoopStatus = LoopStatus.PENDING
    output: Any = None
    plan: Plan | None = None
    iterations: int = 0
    execution_time: float = 0.0
    token_usage: int = 0
    cost: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    recoveries: list[RecoveryAction] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    verification_status: bool | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    execution_state: ExecutionState | None = None
    reason: str | None = None
    review_request: ReviewRequest | None = None
    trace_id: str | None = None


@dataclass
class LoopState:
    """Everything needed to inspect a run or resume it in another process.

    ``status`` says why the run stopped (TERMINATED when a terminator or a
    limit ended it, with ``stop_reason`` saying which); ``execution_state`` is
    where the state machine stands.
    """

    status: LoopStatus = LoopStatus.PENDING
    execution_state: ExecutionState = ExecutionState.INITIALIZED
    current_iteration: int = 0
    current_plan: Plan | None = None
    current_step: Step | None = None
    observations: list[Observation] = field(default_factory=list)
    evaluations: list[Evaluation] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    recoveries: list[RecoveryAction] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    context: LoopContext | None = None
    trace_id: str | None = None
    stop_reason: str | None = None
    started_at: datetime | None = None
    updated_at: datetime | None = None
    #: (from, to) execution-state values, in order; the audit of the state machine.
    transitions: list[tuple[str, str]] = field(default_factory=list)
    #: Counter behind checkpoint ids; lives here so ids never repeat across processes.
    checkpoint_counter: int = 0
    #: Causes already put to a human (e.g. ``failure:<id>``), so each fires once.
    reviewed_causes: list[str] = field(default_factory=list)
    #: The review a paused run is waiting on.
    pending_review: ReviewRequest | None = None
    #: Every human decision applied to this run, in order.
    decisions: list[ReviewResponse] = field(default_factory=list)
    #: Consecutive failures without a passing step, for CIRCUIT_BREAK.
    consecutive_failures: int = 0

    def get_failure(self, failure_id: str) -> Failure | None:
        return next((f for f in self.failures if f.failure_id == failure_id), None)

    def open_failure_for_step(self, step_id: str | None, source: str | None = None) -> Failure | None:
        """The live failure for a step, so a repeat problem reuses it.

        Step-less problems (``step_id`` None) come from different components;
        pass ``source`` to find only the one that component raised.
        """
        for failure in reversed(self.failures):
            if failure.step_id == step_id and failure.is_open and source in (None, failure.source_component):
                return failure
        return None
