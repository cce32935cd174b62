"""Recovery: the policy that picks a strategy, and the handlers that carry it out.

The Recovery component (``recover(failure, state, context)``) only *chooses*
a ``RecoveryAction``; the engine executes it through a ``RecoveryRegistry``
that maps each ``RecoveryStrategy`` to a handler. Handlers see the engine
through the narrow ``RecoveryRuntime`` protocol (state, config, sleep, rng,
planner revision, checkpoint) and answer with a ``HandlerResult`` telling the
engine where the run goes next; the engine makes the state-machine moves.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from .config import LoopConfig
from .plug_points import Checkpoint
from .review import CheckpointTrigger, ReviewRequest
from .types import (
    ExecutionState,
    Failure,
    FailureStatus,
    LoopContext,
    LoopState,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    Step,
    StepStatus,
)

__all__ = [
    "Next",
    "HandlerResult",
    "RecoveryRuntime",
    "RecoveryHandler",
    "RetryHandler",
    "BackoffHandler",
    "ReplanStepHandler",
    "RequestHumanHandler",
    "GracefulDegradationHandler",
    "CircuitBreakHandler",
    "RecoveryRegistry",
    "DefaultRecoveryPolicy",
    "backoff_delay",
    "failed_step",
    "failure_proposal",
]


class Next(Enum):
    """Where the run goes after a handler ran."""

    CONTINUE = "continue"  # to the iteration boundary; the plan decides the next step
    WAIT_FOR_HUMAN = "wait_for_human"  # a review was presented; stop and ask
    FAIL = "fail"  # the run ends FAILED with ``reason``


@dataclass
class HandlerResult:
    next: Next
    #: Did the action do its job? None = not known yet (a retry is judged when
    #: the retried step has run; the engine fills it in then).
    success: bool | None
    reason: str = ""
    review_request: ReviewRequest | None = None


class RecoveryRuntime(Protocol):
    """What a handler may use of the engine."""

    @property
    def state(self) -> LoopState: ...

    @property
    def config(self) -> LoopConfig: ...

    @property
    def checkpoint(self) -> Checkpoint | None: ...

    async def sleep(self, seconds: float) -> None: ...

    def random(self) -> float: ...

    def transition(self, target: ExecutionState) -> None: ...

    async def revise_plan(self) -> Plan: ...


class RecoveryHandler(abc.ABC):
    """Carries out one strategy for one failure."""

    strategy: RecoveryStrategy

    @abc.abstractmethod
    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        """Apply the strategy to ``runtime.state``; never raise for a failing step."""


def failed_step(failure: Failure, state: LoopState) -> Step | None:
    """The plan's step that ``failure`` is about; None for a planning failure or a step no longer planned."""
    if failure.step_id is None or state.current_plan is None:
        return None
    return state.current_plan.get_step(failure.step_id)


def failure_proposal(failure: Failure) -> str:
    """The action a human approves when a failure paused the run."""
    if failure.step_id is None:
        return f"Plan again after: {failure.message}"
    return f"Retry step {failure.step_id} after: {failure.message}"


class RetryHandler(RecoveryHandler):
    """Runs the same step again next iteration; the failure stays open until it passes."""

    strategy = RecoveryStrategy.RETRY

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        step = failed_step(failure, runtime.state)
        if step is None:
            reason = f"cannot retry: failure {failure.failure_id} names no step in the plan"
            return HandlerResult(Next.FAIL, False, reason)
        step.status = StepStatus.RETRY_PENDING
        return HandlerResult(Next.CONTINUE, None, f"retrying step {step.id}")


def backoff_delay(attempt: int, config: LoopConfig, rand: float) -> float:
    """``min(max, base * 2**(attempt-1))`` spread by +/- jitter; ``rand`` in [0, 1)."""
    base = min(config.backoff_max_seconds, config.backoff_base_seconds * 2 ** max(attempt - 1, 0))
    return max(0.0, base * (1 + config.backoff_jitter * (2 * rand - 1)))


class BackoffHandler(RetryHandler):
    """A retry after an exponentially growing, jittered wait through the injected sleep."""

    strategy = RecoveryStrategy.BACKOFF

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        delay = backoff_delay(failure.recovery_attempts, runtime.config, runtime.random())
        action.params["delay_seconds"] = delay
        await runtime.sleep(delay)
        return await super().handle(action, failure, runtime)


class ReplanStepHandler(RecoveryHandler):
    """Asks the planner for a revised plan and adopts it.

    Steps the revision keeps (same id) keep their completed status and output.
    If the failed step is gone, its replacement is the new step whose
    ``metadata["replaces"]`` names it, else the new step at its position;
    dependencies on the old id are rewritten to the replacement, so dependants
    still run, and the failure counts as recovered by the revision. If the
    failed step is kept, it is retried and the failure stays open until it passes.
    """

    strategy = RecoveryStrategy.PLAN_REVISION

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        state = runtime.state
        old = state.current_plan
        if old is None:
            return HandlerResult(Next.FAIL, False, "cannot revise: there is no plan")
        runtime.transition(ExecutionState.REPLANNING)
        revised = await runtime.revise_plan()  # raises on a bad plan; the engine records it
        revised.check_shape()
        _carry_over(old, revised)
        replacement = _rewrite_replaced(old, revised, failure.step_id)
        revised.validate()
        state.current_plan = revised
        action.params["plan_version"] = revised.version
        kept = revised.get_step(failure.step_id) if failure.step_id else None
        state.current_step = kept or (revised.get_step(replacement) if replacement else None) or state.current_step
        if kept is not None and not kept.is_completed():
            kept.status = StepStatus.RETRY_PENDING
            return HandlerResult(Next.CONTINUE, None, f"plan revised to version {revised.version}; retrying {kept.id}")
        if replacement:
            # The problem moves to the replacement: its attempts keep counting against
            # max_recovery_attempts, and it is recovered only when the replacement passes.
            action.params["replaced_by"] = replacement
            failure.context["replaced_by"] = replacement
            replaced, failure.step_id = failure.step_id, replacement
            message = f"plan revised to version {revised.version}; {replacement} replaces {replaced}"
            return HandlerResult(Next.CONTINUE, None, message)
        failure.mark_recovered()  # the revision dropped the failed work altogether
        return HandlerResult(Next.CONTINUE, True, f"plan revised to version {revised.version}")


def _carry_over(old: Plan, revised: Plan) -> None:
    for step in revised.steps:
        before = old.get_step(step.id)
        if before is not None and before.is_completed() and not step.is_completed():
            step.status, step.output = before.status, before.output
            step.evaluation_passed, step.verification_passed = before.evaluation_passed, before.verification_passed


def _rewrite_replaced(old: Plan, revised: Plan, failed_id: str | None) -> str | None:
    if failed_id is None or revised.get_step(failed_id) is not None:
        return None
    old_ids = {s.id for s in old.steps}
    fresh = [s for s in revised.steps if s.id not in old_ids]
    replacement = next((s for s in fresh if s.metadata.get("replaces") == failed_id), None)
    if replacement is None:
        index = next(i for i, s in enumerate(old.steps) if s.id == failed_id)
        if index < len(revised.steps) and revised.steps[index] in fresh:
            replacement = revised.steps[index]
    if replacement is None:
        return None
    for step in revised.steps:
        step.dependencies = [replacement.id if dep == failed_id else dep for dep in step.dependencies]
    return replacement.id


class RequestHumanHandler(RecoveryHandler):
    """Escalates to a human through the engine's checkpoint and stops the run.

    Without a configured checkpoint it uses ``HumanCheckpoint`` with default
    triggers and ``save_checkpoints=False`` (a library must not write into the
    working directory unasked); the run then waits for ``engine.resume``.
    """

    strategy = RecoveryStrategy.HUMAN_HANDOFF

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        checkpoint = runtime.checkpoint
        if checkpoint is None:
            from .checkpoint import CheckpointConfig, HumanCheckpoint  # the engine works without checkpoints

            checkpoint = HumanCheckpoint(CheckpointConfig(save_checkpoints=False))
        if not checkpoint.config.enabled:
            return HandlerResult(Next.FAIL, False, "human handoff chosen, but the checkpoint is disabled")
        failure.status = FailureStatus.ESCALATED
        request = checkpoint.present_for_review(
            runtime.state, CheckpointTrigger.ON_MAJOR_FAILURE, proposed_action=failure_proposal(failure),
            failure=failure,
        )
        return HandlerResult(Next.WAIT_FOR_HUMAN, True, f"escalated as {request.checkpoint_id}", request)


class GracefulDegradationHandler(RecoveryHandler):
    """Skips the failed step; a plan finished this way ends PARTIALLY_COMPLETED."""

    strategy = RecoveryStrategy.GRACEFUL_DEGRADATION

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        step = failed_step(failure, runtime.state)
        if step is None:
            return HandlerResult(Next.FAIL, False, f"cannot degrade: failure {failure.failure_id} names no step")
        step.status = StepStatus.SKIPPED
        failure.mark_recovered()
        failure.context["resolution"] = "skipped"
        return HandlerResult(Next.CONTINUE, True, f"skipped step {step.id}")


class CircuitBreakHandler(RecoveryHandler):
    """Stops the run: too many failures in a row mean retrying is hopeless."""

    strategy = RecoveryStrategy.CIRCUIT_BREAK

    async def handle(self, action: RecoveryAction, failure: Failure, runtime: RecoveryRuntime) -> HandlerResult:
        failure.mark_terminal()
        step = failed_step(failure, runtime.state)
        if step is not None:
            step.status = StepStatus.FAILED
        count = runtime.state.consecutive_failures
        return HandlerResult(Next.FAIL, True, f"circuit breaker opened after {count} consecutive failures")


class RecoveryRegistry:
    """Strategy -> handler; starts with a handler for every strategy."""

    def __init__(self, handlers: Mapping[RecoveryStrategy, RecoveryHandler] | None = None) -> None:
        defaults: list[RecoveryHandler] = [
            RetryHandler(),
            BackoffHandler(),
            ReplanStepHandler(),
            RequestHumanHandler(),
            GracefulDegradationHandler(),
            CircuitBreakHandler(),
        ]
        self._handlers: dict[RecoveryStrategy, RecoveryHandler] = {h.strategy: h for h in defaults}
        self._handlers.update(handlers or {})

    def register(self, strategy: RecoveryStrategy, handler: RecoveryHandler) -> None:
        if not isinstance(strategy, RecoveryStrategy):
            raise TypeError(f"strategy must be a RecoveryStrategy member, got {strategy!r}")
        self._handlers[strategy] = handler

    def get(self, strategy: RecoveryStrategy) -> RecoveryHandler:
        return self._handlers[strategy]


class DefaultRecoveryPolicy:
    """CIRCUIT_BREAK after too many failures in a row; RETRY while the failure
    can recover; once exhausted, HUMAN_HANDOFF when a human can be asked
    (``escalate``), else ``None`` - give up, and the run ends FAILED.
    """

    def __init__(self, *, escalate: bool = False, circuit_breaker_threshold: int = 5) -> None:
        self.escalate = escalate
        self.circuit_breaker_threshold = circuit_breaker_threshold

    def recover(self, failure: Failure, state: LoopState, context: LoopContext) -> RecoveryAction | None:
        if state.consecutive_failures >= self.circuit_breaker_threshold:
            return RecoveryAction(
                strategy=RecoveryStrategy.CIRCUIT_BREAK,
                reason=f"{state.consecutive_failures} consecutive failures",
            )
        if failure.can_recover():
            return RecoveryAction(strategy=RecoveryStrategy.RETRY, reason="failure can still recover")
        if self.escalate:
            return RecoveryAction(strategy=RecoveryStrategy.HUMAN_HANDOFF, reason="recovery attempts exhausted")
        return None
