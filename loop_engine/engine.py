"""``LoopEngine``: plan -> act -> observe -> evaluate -> recover -> terminate.

The engine drives ``LoopState`` through the transition table in
``state_machine``; the concerns live in layers (see ``engine_core``): fields
and primitives (``engine_core``), one step (``engine_steps``), human
decisions (``engine_decisions``), failures and recovery
(``engine_recovery``). This module holds the public API, the driving loop
and the decisions taken at iteration boundaries.

At each decision point the order is: terminator (TERMINATED, a COMPLETED
verdict), plan complete (COMPLETED / PARTIALLY_COMPLETED), budget, max
iterations (both TERMINATED with ``stop_reason``, a FAILED verdict), next
runnable step. Completion is checked before the limits, so a plan finished
on the last allowed iteration is COMPLETED. ``current_iteration`` counts
iterations started (a step executed per iteration).

Snapshots go to ``persistence.save(state, trace_id=state.trace_id)`` after
planning, at the start of every iteration (step IN_PROGRESS), at every
iteration boundary, after a human decision is recorded, and whenever the run
stops (pause included).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .components import PROTOCOLS, REQUIRED_METHODS
from .engine_core import describe_exception, logger
from .engine_recovery import RecoveryMixin
from .engine_steps import StepsMixin
from .errors import ComponentRegistrationError, ConfigurationError, RunInterrupted
from .ids import new_trace_id
from .recovery import failure_proposal
from .review import CheckpointTrigger, ReviewResponse
from .state_machine import IN_ITERATION_STATES, derive_result_status
from .types import (
    ComponentType,
    ExecutionState,
    Failure,
    FailureType,
    LoopContext,
    LoopResult,
    LoopState,
    LoopStatus,
    Plan,
    Step,
    StepStatus,
)

__all__ = ["LoopEngine"]

S = ExecutionState
_FAILURE_TRIGGERS = (CheckpointTrigger.ON_FAILURE, CheckpointTrigger.ON_MAJOR_FAILURE)


class LoopEngine(StepsMixin, RecoveryMixin):
    """Runs one loop at a time; ``state`` is the run's complete, saveable state.

    ``LoopEngine(config=None, *, checkpoint=None, persistence=None, sleep=None,
    clock=None, rng=None, recovery_registry=None)``: the constructor is
    ``EngineCore.__init__``.
    """

    # ----------------------------------------------------------------- API
    def register_component(self, kind: ComponentType, component: Any, *, allow_replace: bool = False) -> None:
        """Register one of the six components (or a VERIFIER) under its ComponentType."""
        if not isinstance(kind, ComponentType):
            match = next((k for k in ComponentType if isinstance(kind, str) and kind.lower() == k.value), None)
            hint = f"ComponentType.{match.name}" if match else "a ComponentType member, e.g. ComponentType.PLANNER"
            raise ComponentRegistrationError(f"component kind {kind!r} is not a ComponentType; use {hint}")
        if kind in self._components and not allow_replace:
            raise ComponentRegistrationError(
                f"a {kind.value} is already registered ({type(self._components[kind]).__name__}); "
                "pass allow_replace=True to replace it"
            )
        if isinstance(component, type):
            raise ComponentRegistrationError(
                f"{component.__name__} is a class; register an instance, e.g. {component.__name__}(...)"
            )
        for method in REQUIRED_METHODS[kind]:
            if not callable(getattr(component, method, None)):
                raise ComponentRegistrationError(
                    f"{type(component).__name__} cannot be registered as ComponentType.{kind.name}: "
                    f"it has no {method}() method, which the {PROTOCOLS[kind].__name__} protocol requires; add it"
                )
        self._components[kind] = component

    def add_gate(self, gate: Any, stage: str = "pre") -> None:
        """Add a deterministic gate before the actor (``"pre"``) or on its output (``"post"``)."""
        if not callable(getattr(gate, "check", None)):
            raise ConfigurationError(f"{type(gate).__name__} is not a gate: it needs check(GateContext) -> GateResult")
        if stage == "pre":
            self._pre_gates.add(gate)
        elif stage == "post":
            self._post_gates.add(gate)
        else:
            raise ConfigurationError(f"gate stage {stage!r} is unknown; use 'pre' or 'post'")

    async def run(self, context: LoopContext, trace_id: str | None = None) -> LoopResult:
        """Run a fresh loop until it completes, fails, is terminated or pauses."""
        if not isinstance(context, LoopContext):
            raise TypeError(f"run() needs a LoopContext, got {type(context).__name__}")
        self._check_ready(context)
        problem = self._unstorable(context.initial_context, "LoopContext.initial_context")
        if problem is not None:
            raise ConfigurationError(f"{problem}; the run is saved as JSON, so its inputs must be JSON values")
        with self._exclusive():
            now = datetime.now()
            self._state = LoopState(
                context=context, trace_id=trace_id or new_trace_id(), started_at=now, updated_at=now
            )
            self._clock_mark = self._clock()
            await self._drive_or_fail()
            return self._result()

    async def resume(self, state: LoopState, response: ReviewResponse | None = None) -> LoopResult:
        """Continue a saved run: apply ``response`` to its open review, or carry on
        where it stopped (a recorded but unapplied decision, an interrupted iteration).
        """
        if state.context is None:
            raise ValueError(
                f"run {state.trace_id!r} has no context (goal, budget), so it cannot be resumed; "
                "load it from a JSON snapshot (LoopStatePersistence with format='json') - markdown "
                "snapshots keep only the header fields"
            )
        self._check_ready(state.context)
        with self._exclusive():
            self._state = state
            self._clock_mark = self._clock()
            if state.trace_id is None:
                state.trace_id = new_trace_id()
            if response is not None:
                await self._accept(response)
            elif state.execution_state is S.WAITING_FOR_HUMAN and state.pending_review is None and state.decisions:
                self._apply(state.decisions[-1])
            elif state.execution_state in IN_ITERATION_STATES:
                self._abandon_iteration()
            await self._drive_or_fail()
            return self._result()

    async def continue_saved(self, state: LoopState, response: ReviewResponse | None = None) -> LoopResult:
        """``resume``, for a snapshot wherever it stopped: one paused or finished is answered from itself.

        Re-entering the engine there would either do nothing or - for a pause
        whose decision is still pending - wrongly continue without one. Either
        way ``state`` is the engine's ``state`` afterwards.
        """
        if response is None and (state.pending_review is not None or state.execution_state.is_terminal):
            with self._exclusive():
                self._state = state
            return _result_of_stopped(state)
        return await self.resume(state, response)

    # --------------------------------------------------------- the driver
    async def _drive_or_fail(self) -> None:
        """``_drive``, ending the run FAILED if an exception escapes the component boundaries.

        Components' exceptions are recorded failures already; what reaches here is
        a bug or bad data the checks missed. The run must not be left (or saved)
        looking RUNNING, so it moves to FAILED through table transitions and the
        exception propagates. A run paused for a human stays paused: a decision
        handler that raises leaves a review that ``resume`` can still answer;
        ``RunInterrupted`` from a save is a deliberate stop, not an error.
        """
        try:
            await self._drive()
        except RunInterrupted:
            raise
        except Exception as exc:
            state = self._state
            here = state.execution_state
            if here.is_terminal or (here is S.WAITING_FOR_HUMAN and state.pending_review is not None):
                raise
            failure = Failure(
                type=FailureType.EXECUTION_ERROR,
                message=f"internal error: {describe_exception(exc)}",
                step_id=state.current_step.id if state.current_step is not None else None,
                source_component="engine",
            )
            failure.mark_terminal()
            state.failures.append(failure)
            if here is S.INITIALIZED:
                self._move(S.PLANNING)
            elif here in IN_ITERATION_STATES:
                self._move(S.ITERATION_COMPLETE)
            try:
                self._stop(S.FAILED, failure.message)
            except Exception:  # saving may be what failed; the state in memory is FAILED either way
                logger.exception("run %s: could not save the failed state", state.trace_id)
            raise

    async def _drive(self) -> None:
        state = self._state
        while True:
            here = state.execution_state
            if here.is_terminal or (here is S.WAITING_FOR_HUMAN and state.pending_review is not None):
                return
            if state.current_plan is None:
                await self._plan()
                continue
            step = await self._decide()
            if step is None:
                continue
            await self._iterate(step)
            if state.execution_state is S.ITERATION_COMPLETE:
                await self._boundary()

    async def _plan(self) -> None:
        state, context = self._state, self._context()
        if state.execution_state is not S.PLANNING:
            self._move(S.PLANNING)
        planner = self._components.get(ComponentType.PLANNER)
        if planner is None or not self._config.enable_planner:
            plan = Plan(goal=context.goal, steps=[Step(id="step_1", description=context.goal)])
        else:
            try:
                plan = await self._call(
                    ComponentType.PLANNER, planner.create_plan, context.goal, dict(context.initial_context)
                )
                if not isinstance(plan, Plan):
                    raise TypeError(f"create_plan returned {type(plan).__name__}; it must return a Plan")
                plan.validate()
            except Exception as exc:  # component boundary: a bad plan is a recorded failure
                failure = self._fail_step(None, FailureType.PLANNING_FAILURE, f"planning failed: {exc}", "planner")
                await self._give_up(failure)
                return
        state.current_plan = plan
        self._recovered(state.open_failure_for_step(None, "planner"))  # planning works after a human let it retry
        await self._boundary()

    async def _decide(self) -> Step | None:
        """At a decision point: stop (returns None) or return the next step to run."""
        state, context = self._state, self._context()
        terminator = self._components.get(ComponentType.TERMINATOR)
        if terminator is not None:
            try:
                verdict = await self._call(
                    ComponentType.TERMINATOR, terminator.should_terminate, state, context.goal, context
                )
            except Exception as exc:  # component boundary
                await self._give_up(self._component_raised(None, "terminator", exc))
                return None
            if verdict is not True and verdict is not False:
                problem = f"terminator failed: should_terminate must return True or False, got {verdict!r}"
                await self._give_up(self._fail_step(None, FailureType.EXECUTION_ERROR, problem, "terminator"))
                return None
            self._recovered(state.open_failure_for_step(None, "terminator"))  # it answers again after a human's go
            if verdict:
                self._stop(S.POLICY_TERMINATED, "terminator fired")
                return None
        plan = state.current_plan
        assert plan is not None
        if plan.is_complete():
            partial = any(s.status is StepStatus.SKIPPED for s in plan.steps)
            self._stop(S.PARTIALLY_COMPLETED if partial else S.COMPLETED, None)
            return None
        exhausted = context.budget.exhausted_reason()
        if exhausted:
            self._stop(S.BUDGET_EXHAUSTED, exhausted)
            return None
        if state.current_iteration >= self._config.max_iterations:
            self._stop(S.BUDGET_EXHAUSTED, f"max iterations reached ({self._config.max_iterations})")
            return None
        step = plan.get_next_step()
        if step is None:
            waiting = [f"{s.id} ({s.status.value})" for s in plan.steps if not s.is_completed()]
            failure = self._fail_step(
                None, FailureType.PLANNING_FAILURE,
                f"no runnable step: {', '.join(waiting) or 'the plan has no steps'}", "engine",
            )
            await self._give_up(failure)
            return None
        return step

    async def _iterate(self, step: Step) -> None:
        state = self._state
        state.current_iteration += 1
        step.status, step.start_time = StepStatus.IN_PROGRESS, datetime.now()
        step.attempts += 1
        state.current_step = step
        self._move(S.ACTING)
        self._save()
        failure = await self._execute_step(step)
        if failure is None:
            self._step_passed(step)
            self._move(S.ITERATION_COMPLETE)
        else:
            await self._recover(failure)

    async def _boundary(self) -> None:
        """Ask the checkpoint (if any) whether to stop here, else save and go on."""
        self._tick()
        if self._checkpoint is not None:
            trigger = self._checkpoint.should_pause(self._state)
            if trigger is not None:
                request = self._checkpoint.present_for_review(
                    self._state, trigger, proposed_action=self._boundary_proposal(trigger)
                )
                # a failure trigger's review settles that failure: a reject ends it, a retry reruns its step
                failure_id = request.context.get("failure_id") if trigger in _FAILURE_TRIGGERS else None
                await self._pause(request, self._state.get_failure(failure_id) if failure_id else None)
                return
        self._save()

    def _boundary_proposal(self, trigger: CheckpointTrigger) -> str:
        plan = self._state.current_plan
        if trigger is CheckpointTrigger.ON_MAJOR_FAILURE or trigger is CheckpointTrigger.ON_FAILURE:
            failure = next((f for f in reversed(self._state.failures) if f.is_open), None)
            if failure is not None:
                return failure_proposal(failure)
        if plan is not None and plan.is_complete():
            return "Finish the run: the plan is complete"
        upcoming = plan.get_next_step() if plan is not None else None
        return f"Continue with step {upcoming.id}: {upcoming.description}" if upcoming else "Continue the run"

    # ------------------------------------------------------------ helpers
    def _abandon_iteration(self) -> None:
        """Resume after a crash mid-iteration: the unfinished step runs again."""
        state = self._state
        step = state.current_step
        if state.execution_state is S.ACTING and step is not None and step.status is StepStatus.IN_PROGRESS:
            state.current_iteration -= 1  # the iteration never finished; it runs again as the same one
            step.attempts -= 1
        if state.current_plan is not None:
            for candidate in state.current_plan.steps:
                if candidate.status in (StepStatus.IN_PROGRESS, StepStatus.RECOVERY_PENDING):
                    candidate.status = StepStatus.RETRY_PENDING
        self._move(S.ITERATION_COMPLETE)

    def _check_ready(self, context: LoopContext | None) -> None:
        """Config and context are checked again here: either may have changed since it was built."""
        self._config.validate()
        if context is not None:
            context.validate()
        if ComponentType.ACTOR not in self._components:
            raise ConfigurationError(
                "no actor registered; call engine.register_component(ComponentType.ACTOR, actor) before run()"
            )

    def _result(self) -> LoopResult:
        state, context = self._state, self._context()
        plan = state.current_plan
        verifier_ran = self._config.enable_verification and ComponentType.VERIFIER in self._components
        done = [s for s in plan.steps if s.status is StepStatus.VERIFIED_COMPLETED] if plan else []
        return LoopResult(
            status=derive_result_status(state),
            output={s.id: s.output for s in done},
            plan=plan,
            iterations=state.current_iteration,
            execution_time=context.budget.time_used,
            token_usage=context.budget.tokens_used,
            cost=context.budget.cost_used,
            failures=list(state.failures),
            recoveries=list(state.recoveries),
            evaluations=list(state.evaluations),
            verification_status=all(s.verification_passed for s in done) if verifier_ran else None,
            execution_state=state.execution_state,
            reason=state.stop_reason,
            review_request=state.pending_review if state.execution_state is S.WAITING_FOR_HUMAN else None,
            trace_id=state.trace_id,
        )


def _result_of_stopped(state: LoopState) -> LoopResult:
    """The verdict of a snapshot that needs no engine step: already paused or finished."""
    return LoopResult(
        status=LoopStatus.PAUSED if state.pending_review is not None else derive_result_status(state),
        plan=state.current_plan,
        iterations=state.current_iteration,
        failures=list(state.failures),
        recoveries=list(state.recoveries),
        evaluations=list(state.evaluations),
        execution_state=state.execution_state,
        reason=state.stop_reason,
        review_request=state.pending_review,
        trace_id=state.trace_id,
    )
