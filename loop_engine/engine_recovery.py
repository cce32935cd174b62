"""What the engine does with a Failure: recover it, give up, or ask a human.

``RecoveryMixin`` asks the Recovery component for a ``RecoveryAction``,
enforces the per-failure attempt cap (strategies that re-run work are
refused once a failure is exhausted), records the action linked to its
failure, runs the strategy's handler from the ``RecoveryRegistry`` and makes
the state-machine move the handler asks for. Giving up is the one terminal
decision that may be turned into a pause: a configured checkpoint is asked
first (ON_MAJOR_FAILURE sees the failure marked TERMINAL).
"""

from __future__ import annotations

from typing import Any

from .config import LoopConfig
from .engine_core import EngineCore, describe_exception
from .engine_decisions import DecisionsMixin
from .errors import ConfigurationError, InvalidTransitionError
from .plug_points import Checkpoint
from .recovery import DefaultRecoveryPolicy, HandlerResult, Next, failed_step, failure_proposal
from .types import (
    ComponentType,
    ExecutionState,
    Failure,
    LoopState,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    StepStatus,
)

__all__ = ["RecoveryMixin", "EngineRuntime"]

#: Strategies that spend another attempt on the same problem.
_RERUNS = frozenset({RecoveryStrategy.RETRY, RecoveryStrategy.BACKOFF, RecoveryStrategy.PLAN_REVISION})


class EngineRuntime:
    """The narrow view of the engine that recovery handlers get (``RecoveryRuntime``)."""

    def __init__(self, engine: EngineCore) -> None:
        self._engine = engine

    @property
    def state(self) -> LoopState:
        return self._engine.state

    @property
    def config(self) -> LoopConfig:
        return self._engine.config

    @property
    def checkpoint(self) -> Checkpoint | None:
        return self._engine.checkpoint

    async def sleep(self, seconds: float) -> None:
        await self._engine._sleep(seconds)
        self._engine._tick()

    def random(self) -> float:
        return self._engine._rng.random()

    def transition(self, target: ExecutionState) -> None:
        self._engine._move(target)

    async def revise_plan(self) -> Plan:
        engine = self._engine
        planner = engine._components.get(ComponentType.PLANNER)
        if planner is None:
            raise ConfigurationError("PLAN_REVISION needs a planner; register one with ComponentType.PLANNER")
        state = engine.state
        revised = await engine._call(
            ComponentType.PLANNER,
            planner.revise_plan,
            state.current_plan,
            list(state.observations),
            list(state.evaluations),
        )
        if not isinstance(revised, Plan):
            raise TypeError(f"revise_plan returned {type(revised).__name__}; it must return a Plan")
        return revised


class RecoveryMixin(DecisionsMixin):
    """Turns a failed step into the run's next place: a retry, a human, or FAILED."""

    def _recovery_policy(self) -> Any:
        policy = self._components.get(ComponentType.RECOVERY)
        if policy is not None:
            return policy
        return DefaultRecoveryPolicy(
            escalate=self._asks_about_failures(),
            circuit_breaker_threshold=self.config.circuit_breaker_threshold,
        )

    def _asks_about_failures(self) -> bool:
        """Whether exhausted recovery should hand off to a human rather than fail:
        only when the checkpoint is on and its triggers care about failures
        (``manual_only`` and ``disabled`` presets do not)."""
        if self.checkpoint is None:
            return False
        config = self.checkpoint.config
        return bool(config.enabled and (config.trigger_on_major_failure or config.trigger_on_failure))

    async def _recover(self, failure: Failure) -> None:
        """From a failed step to the next place: boundary, human, or FAILED."""
        state = self.state
        self._move(ExecutionState.RECOVERING)
        step = failed_step(failure, state)
        if step is not None:
            step.status = StepStatus.RECOVERY_PENDING
        if not self.config.enable_recovery:
            await self._give_up(failure, "recovery is disabled (LoopConfig.enable_recovery=False)")
            return
        threshold = self.config.circuit_breaker_threshold
        if state.consecutive_failures >= threshold:  # whatever the policy would choose
            action = RecoveryAction(
                strategy=RecoveryStrategy.CIRCUIT_BREAK,
                reason=f"{state.consecutive_failures} consecutive failures (circuit_breaker_threshold={threshold})",
            )
        else:
            try:
                policy = self._recovery_policy()
                action = await self._call(ComponentType.RECOVERY, policy.recover, failure, state, self._context())
            except Exception as exc:  # component boundary
                await self._give_up(failure, f"{failure.message}; recovery component raised {describe_exception(exc)}")
                return
        if action is None:
            await self._give_up(failure, f"{failure.message} (recovery attempts exhausted)")
            return
        if not isinstance(action, RecoveryAction):
            await self._give_up(
                failure, f"{failure.message}; recover() returned {type(action).__name__}, not a RecoveryAction"
            )
            return
        if not isinstance(action.strategy, RecoveryStrategy):
            await self._give_up(
                failure,
                f"{failure.message}; recover() chose strategy {action.strategy!r}, which is not a "
                "RecoveryStrategy member; use e.g. RecoveryStrategy.RETRY",
            )
            return
        action.failure_id = failure.failure_id
        state.recoveries.append(action)
        if action.strategy in _RERUNS and not failure.can_recover():
            action.executed, action.success = False, False
            action.reason = (
                f"refused: failure {failure.failure_id} used {failure.recovery_attempts} of "
                f"{failure.max_recovery_attempts} attempts"
            )
            await self._give_up(failure, f"{failure.message} (recovery attempts exhausted)")
            return
        failure.record_recovery_attempt(action.action_id)
        handler = self._registry.get(action.strategy)
        try:
            result: HandlerResult = await handler.handle(action, failure, EngineRuntime(self))
        except InvalidTransitionError:
            raise  # a bug in a handler or the engine, not a failed recovery
        except Exception as exc:  # handlers call components (revise_plan)
            action.executed, action.success = True, False
            await self._give_up(failure, f"{action.strategy.name} failed: {describe_exception(exc)}")
            return
        action.executed, action.success = True, result.success
        if result.next is Next.CONTINUE:
            self._move(ExecutionState.ITERATION_COMPLETE)
        elif result.next is Next.WAIT_FOR_HUMAN and result.review_request is not None:
            await self._pause(result.review_request, failure)
        else:  # FAIL, or a handler that wanted a human but presented no review
            await self._give_up(failure, result.reason or f"{action.strategy.name} could not recover")

    async def _give_up(self, failure: Failure, reason: str | None = None) -> None:
        """The terminal decision for ``failure``; a checkpoint may turn it into a pause."""
        state = self.state
        failure.mark_terminal()
        step = failed_step(failure, state)
        if step is not None and not step.is_completed():
            step.status = StepStatus.FAILED
        if self.checkpoint is not None:
            trigger = self.checkpoint.should_pause(state)
            if trigger is not None:
                request = self.checkpoint.present_for_review(state, trigger, proposed_action=failure_proposal(failure))
                await self._pause(request, failure)
                return
        self._stop(ExecutionState.FAILED, reason or failure.message)
