"""One iteration of the loop: gates, act, observe, evaluate, verify.

``StepsMixin`` is the part of ``LoopEngine`` that runs a single step and turns
whatever a component does wrong - raising, returning the wrong type, a gate
or an evaluation saying no - into one recorded ``Failure`` per problem. This
is the one place a broad ``except Exception`` is right: a component is user
code, and its bugs must become Failures the recovery machinery can see
rather than crash the run.
"""

from __future__ import annotations

import asyncio
import logging
import sysconfig
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

from .engine_core import EngineCore, describe_exception
from .gates.base import GateContext, GateResult, GateRunner
from .jsonvalue import NotJSONSerialisableError, Where, check_json
from .types import (
    ComponentType,
    Evaluation,
    ExecutionState,
    Failure,
    FailureType,
    Observation,
    Step,
    StepStatus,
)

__all__ = ["StepsMixin"]


def _gate_evidence(results: list[GateResult]) -> dict[str, Any]:
    return {"gates": [r.to_dict() for r in results]}


class StepsMixin(EngineCore):
    """Runs one step; returns the ``Failure`` it met, or None when it passed."""

    async def _execute_step(self, step: Step) -> Failure | None:
        state, context = self.state, self._context()
        failure = await self._check_gates(self._pre_gates, "pre", step, None, FailureType.EXECUTION_ERROR)
        if failure is not None:
            return failure

        actor = self._components[ComponentType.ACTOR]
        context.budget.steps_used += 1
        try:
            output = await self._call(ComponentType.ACTOR, actor.execute, step, list(state.observations), context)
        except Exception as exc:  # component boundary: see module docstring
            return self._component_raised(step, "actor", exc)
        finally:
            self._tick()
        problem = self._unstorable(output, ("step", step.id, "output"))
        if problem is not None:
            return self._fail_step(step, FailureType.INVALID_OUTPUT, f"actor failed: {problem}", "actor")
        step.output = output
        step.status = StepStatus.EXECUTED

        failure = await self._check_gates(self._post_gates, "post", step, output, FailureType.INVALID_OUTPUT)
        if failure is not None:
            return failure

        self._move(ExecutionState.OBSERVING)
        failure = await self._observe(step, output)
        if failure is not None:
            return failure
        failure = await self._evaluate(step)
        if failure is not None:
            return failure
        return await self._verify(step)

    async def _check_gates(
        self, runner: GateRunner, stage: str, step: Step, output: Any, kind: FailureType
    ) -> Failure | None:
        """Run ``runner``'s gates on ``step`` (and the actor's ``output`` after it ran)."""
        if not runner.gates:
            return None
        context = self._context()
        gate_context = GateContext(
            output=output,
            step_id=step.id,
            step_description=step.description,
            # Tool gates (lint, type check, tests) need a tree to run in: the step's
            # own ``working_dir``/``files`` metadata, else the run's initial context.
            files=_gate_files(step.metadata.get("files", context.initial_context.get("files"))),
            working_dir=step.metadata.get("working_dir", context.initial_context.get("working_dir")),
            budget=context.budget,
            metadata={"stage": stage, **step.metadata},
        )
        try:
            # Tool gates block on subprocesses; keep the event loop free while they run.
            results = await asyncio.to_thread(runner.run, gate_context)
        except Exception as exc:  # a gate is user code too
            return self._fail_step(step, kind, f"{stage}-gate raised {describe_exception(exc)}", f"{stage}_gate")
        blocking = GateRunner.first_blocking(results)
        if blocking is None:
            return None
        return self._fail_step(
            step,
            kind,
            f"{stage}-gate {blocking.gate_name} failed: {blocking.message}",
            f"{stage}_gate",
            _gate_evidence(results),
        )

    def _unstorable(self, value: Any, where: Where) -> str | None:
        """Why a JSON snapshot could not hold ``value``, when the run is saved as JSON; else None.

        Checked where a component hands the value over, so it becomes that
        component's recorded (recoverable) failure instead of a save that
        raises later. Markdown snapshots render any value, so they check nothing.
        """
        if self._persistence is None or getattr(getattr(self._persistence, "config", None), "format", "json") != "json":
            return None
        try:
            check_json(value, where)
        except NotJSONSerialisableError as exc:
            return str(exc)
        return None

    async def _observe(self, step: Step, output: Any) -> Failure | None:
        observer = self._components.get(ComponentType.OBSERVER)
        if observer is None or not self.config.enable_observer:
            observation = Observation(content=output, source="actor", step_id=step.id)
        else:
            try:
                observation = await self._call(ComponentType.OBSERVER, observer.observe, output, step, self._context())
            except Exception as exc:  # component boundary
                return self._component_raised(step, "observer", exc)
            if not isinstance(observation, Observation):
                return self._wrong_type(step, "observer", observation, "observe() must return an Observation")
        if observation.step_id is None:
            observation.step_id = step.id
        problem = self._unstorable([observation.content, observation.metadata], f"observation of step {step.id!r}")
        if problem is not None:
            return self._fail_step(step, FailureType.INVALID_OUTPUT, f"observer failed: {problem}", "observer")
        self.state.observations.append(observation)
        return None

    async def _evaluate(self, step: Step) -> Failure | None:
        evaluator = self._components.get(ComponentType.EVALUATOR)
        if evaluator is None or not self.config.enable_evaluator:
            step.status = StepStatus.EVALUATED
            return None
        self._move(ExecutionState.EVALUATING)
        state, context = self.state, self._context()
        try:
            evaluation = await self._call(
                ComponentType.EVALUATOR,
                evaluator.evaluate,
                state.current_plan,
                list(state.observations),
                context.goal,
                context,
            )
        except Exception as exc:  # component boundary
            return self._component_raised(step, "evaluator", exc)
        if not isinstance(evaluation, Evaluation):
            return self._wrong_type(step, "evaluator", evaluation, "evaluate() must return an Evaluation")
        if evaluation.step_id is None:
            evaluation.step_id = step.id
        problem = self._unstorable(evaluation.metrics, f"evaluation metrics of step {step.id!r}")
        if problem is not None:
            return self._fail_step(step, FailureType.INVALID_OUTPUT, f"evaluator failed: {problem}", "evaluator")
        state.evaluations.append(evaluation)
        step.evaluation_passed = evaluation.passed is True
        if not step.evaluation_passed:
            step.status = StepStatus.EVALUATION_FAILED
            return self._fail_step(
                step,
                FailureType.INVALID_OUTPUT,
                f"evaluation rejected step {step.id}: {evaluation.feedback or 'no feedback'}",
                "evaluator",
                {"score": evaluation.score, "feedback": evaluation.feedback},
            )
        step.status = StepStatus.EVALUATED
        return None

    async def _verify(self, step: Step) -> Failure | None:
        verifier = self._components.get(ComponentType.VERIFIER)
        if verifier is None or not self.config.enable_verification:
            return None  # no verifier: evaluated steps complete
        self._move(ExecutionState.VERIFYING)
        try:
            verdict = await self._call(
                ComponentType.VERIFIER, verifier.verify, step, list(self.state.observations), self._context()
            )
        except Exception as exc:  # component boundary
            return self._component_raised(step, "verifier", exc)
        step.verification_passed = verdict is True
        if not step.verification_passed:
            step.status = StepStatus.VERIFICATION_FAILED
            return self._fail_step(
                step, FailureType.VERIFICATION_FAILED, f"verification rejected step {step.id} ({verdict!r})", "verifier"
            )
        return None

    def _component_raised(self, step: Step | None, source: str, exc: Exception) -> Failure:
        """The loop's own code raised: one WARNING with its traceback, and where it raised kept in the failure.

        Logged with the traceback the first time a step's problem is seen; a
        retry that raises again adds one line, so a recovering loop does not
        repeat its traceback for every attempt.
        """
        step_id = step.id if step is not None else None
        first = self.state.open_failure_for_step(step_id, None if step_id else source) is None
        at = raised_at(exc)
        failure = self._fail_step(step, FailureType.EXECUTION_ERROR, f"{source} raised {describe_exception(exc)}",
                                  source, {"raised_at": at} if at else None)
        where = f" at {at['file']}:{at['line']}" if at else ""
        _log.warning("run %s, step %s: the %s raised %s%s%s", self.state.trace_id, step_id or "-", source,
                     describe_exception(exc), where, "" if first else " (again)", exc_info=exc if first else None)
        return failure

    def _wrong_type(self, step: Step, source: str, value: Any, rule: str) -> Failure:
        message = f"{source} returned {type(value).__name__}; {rule}"
        return self._fail_step(step, FailureType.INVALID_OUTPUT, message, source)

    def _fail_step(
        self,
        step: Step | None,
        kind: FailureType,
        message: str,
        source: str,
        evidence: dict[str, Any] | None = None,
    ) -> Failure:
        """Record a problem, reusing the open Failure of the same step (one per problem)."""
        state = self.state
        step_id = step.id if step is not None else None
        if step is not None:
            step.end_time = datetime.now()
            if step.status in (StepStatus.IN_PROGRESS, StepStatus.EXECUTED):
                step.status = StepStatus.FAILED
        failure = state.open_failure_for_step(step_id, None if step_id else source)
        if failure is None:
            failure = Failure(step_id=step_id, max_recovery_attempts=self.config.max_recovery_attempts)
            state.failures.append(failure)
        failure.type, failure.message, failure.source_component = kind, message, source
        failure.evidence = dict(evidence or {})
        failure.timestamp = datetime.now()
        state.consecutive_failures += 1
        self._settle_recoveries(failure, success=False)
        return failure

    def _step_passed(self, step: Step) -> None:
        step.status = StepStatus.VERIFIED_COMPLETED
        step.end_time = datetime.now()
        self.state.consecutive_failures = 0
        self._recovered(self.state.open_failure_for_step(step.id))


_log = logging.getLogger("loop_engine.engine")
#: Where the standard library and installed packages live: a frame there is not the loop's own line.
_LIBRARY_DIRS = tuple(str(Path(p).resolve()) for p in {sysconfig.get_paths()[key] for key in ("stdlib", "purelib",
                                                                                               "platlib")})


def raised_at(exc: BaseException) -> dict[str, Any] | None:
    """``{"file", "line", "function"}`` of the innermost frame of ``exc`` outside the standard library and
    installed packages (the loop's own line), else of the innermost frame; None without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    own = [f for f in frames if not str(Path(f.filename).resolve()).startswith(_LIBRARY_DIRS)]
    frame = (own or frames)[-1]
    return {"file": frame.filename, "line": frame.lineno, "function": frame.name}


def _gate_files(files: Any) -> dict[str, str]:
    """``{path: text}`` from metadata; anything else means "no files" rather than a crash in a gate."""
    if isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return dict(files)
    return {}
