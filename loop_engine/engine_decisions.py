"""Applying a human's decision to a paused run, exactly once.

``DecisionsMixin._accept`` checks the response belongs to the open review,
checks a MODIFY before anything changes, then records the decision, clears
``pending_review`` and saves *before* applying it. A process that dies after
that save is resumed with ``resume(state)`` (no response): the decision is
found in ``state.decisions`` and applied from the snapshot, never twice.

Decisions, for the two kinds of pause (``state.metadata["pending_action"]``):

- failure pause (a failure that would end the run, or a HUMAN_HANDOFF):
  APPROVE and RETRY retry the failed step (or plan again when planning
  failed); the failure is revived with its attempts reset to 0 - the human
  grants a fresh allowance, and since its cause is already reviewed it will
  not ask again for it. REJECT ends FAILED.
- boundary pause (iteration boundary, plan complete, cost, external request):
  APPROVE continues; RETRY re-runs the current step.

MODIFY keys (``response.modifications``), applied in this order, then the
run continues as for APPROVE:

- ``context``: dict merged into ``state.context.initial_context``.
- ``plan``: ``{"skip": [step ids], "add": [{"id", "description",
  "dependencies"}]}``; skipped steps count as done (a plan finished with a
  skip is PARTIALLY_COMPLETED), added steps are appended; plan version + 1.
  ``plan_changes_problem`` says which changes a plan can take.
- ``step``: fields for the failed (else current) step: ``description``,
  ``metadata`` (merged), ``output`` - a reviewer-supplied output completes
  the step (VERIFIED_COMPLETED) and recovers its failure.

REJECT ends FAILED with ``stop_reason`` = the feedback; PAUSE records the
decision and keeps the run in WAITING_FOR_HUMAN with the review open.
"""

from __future__ import annotations

from typing import Any

from .engine_core import EngineCore
from .errors import PlanValidationError
from .recovery import failed_step
from .review import HumanDecision, ReviewRequest, ReviewResponse
from .types import ExecutionState, Failure, FailureStatus, Plan, Step, StepStatus

__all__ = ["DecisionsMixin", "MODIFY_KEYS", "modifications_problem", "plan_changes_problem"]

MODIFY_KEYS = ("context", "plan", "step")
_STEP_KEYS = ("description", "metadata", "output")
_PENDING = "pending_action"


class DecisionsMixin(EngineCore):
    """Stops a run to ask a human, and applies the answer exactly once."""

    async def _pause(self, request: ReviewRequest, failure: Failure | None = None) -> None:
        """Stop in WAITING_FOR_HUMAN; with a decision handler, get and apply the answer now.

        The pause is saved before the handler is asked, so a handler that
        raises (or a process that dies while it waits) leaves a snapshot
        that ``resume(state, response)`` can answer.
        """
        state = self._state
        state.metadata[_PENDING] = (
            {"kind": "boundary"}
            if failure is None
            else {"kind": "failure", "failure_id": failure.failure_id, "step_id": failure.step_id}
        )
        state.pending_review = request
        self._move(ExecutionState.WAITING_FOR_HUMAN)
        self._show_waiting(request)
        self._save()
        if self._checkpoint is None or self._checkpoint.decision_handler is None:
            return
        response = await self._checkpoint.await_decision(request)
        await self._accept(response)

    def _show_waiting(self, request: ReviewRequest) -> None:
        """The request was summarised just before the pause; a reviewer reads it while the run waits."""
        now = {"status": self._state.status.name, "execution_state": self._state.execution_state.value}
        request.state_summary.update({key: value for key, value in now.items() if key in request.state_summary})
        if self._checkpoint is not None:
            self._checkpoint.refresh_record(request)

    async def _accept(self, response: ReviewResponse) -> None:
        state = self.state
        pending = state.pending_review
        if state.execution_state is not ExecutionState.WAITING_FOR_HUMAN:
            raise ValueError(
                f"run {state.trace_id!r} is {state.execution_state.value}, not waiting for a human, "
                f"so the response for {getattr(response, 'checkpoint_id', None)!r} cannot be applied"
            )
        if pending is None:
            raise ValueError(
                f"run {state.trace_id!r} has no open review, so the response for "
                f"{getattr(response, 'checkpoint_id', None)!r} cannot be applied; "
                "call resume(state) without a response to continue it"
            )
        if response.checkpoint_id != pending.checkpoint_id:
            raise ValueError(
                f"response is for checkpoint {response.checkpoint_id!r} but run {state.trace_id!r} "
                f"waits on checkpoint {pending.checkpoint_id!r}; answer the open review"
            )
        if not isinstance(response.decision, HumanDecision):
            raise ValueError(
                f"response.decision must be a HumanDecision member (e.g. HumanDecision.APPROVE), "
                f"got {response.decision!r}"
            )
        if response.decision is HumanDecision.MODIFY:
            self._check_modifications(response.modifications)
        if self.checkpoint is not None:
            self.checkpoint.record_decision(state, response)
        else:
            state.decisions.append(response)
        if response.decision is not HumanDecision.PAUSE:
            state.pending_review = None
        self._save()
        self._apply(response)

    def _apply(self, response: ReviewResponse) -> None:
        """Carry out a recorded decision; the run stays in WAITING_FOR_HUMAN unless rejected."""
        state = self.state
        decision = response.decision
        if decision is HumanDecision.PAUSE:
            return
        pending: dict[str, Any] = state.metadata.pop(_PENDING, None) or {"kind": "boundary"}
        failure = state.get_failure(pending["failure_id"]) if pending.get("kind") == "failure" else None
        if decision is HumanDecision.REJECT:
            if failure is not None:
                failure.mark_terminal()
                step = failed_step(failure, state)
                if step is not None and not step.is_completed():
                    step.status = StepStatus.FAILED
            reviewer = response.reviewer or "a reviewer"
            self._stop(ExecutionState.FAILED, response.feedback or f"rejected by {reviewer}")
            return
        state.consecutive_failures = 0  # a human let the run go on: the breaker counts afresh
        if decision is HumanDecision.MODIFY:
            target = self._modify_target(failure)
            self._modify(response.modifications, target)
            # Only a change that completes the failed step (an output, a skip)
            # recovers its failure; otherwise the failed work runs again (a
            # planning failure plans again) on the same, already-reviewed
            # failure, so failing again cannot ask the human again forever.
            if target is not None and target.is_completed():
                self._recovered(failure or state.open_failure_for_step(target.id))
                return
        if failure is not None and (not failure.is_open or failure.status is FailureStatus.ESCALATED):
            self._revive(failure)  # it had ended the run, or was handed over: the human gives it another go
        elif decision is HumanDecision.RETRY:
            step = failed_step(failure, state) if failure is not None else state.current_step
            if step is not None:
                self._rerun(step)
        # APPROVE on a failure still being recovered: the recovery already planned goes ahead

    def _revive(self, failure: Failure) -> None:
        failure.status = FailureStatus.RECOVERY_IN_PROGRESS
        failure.recoverable = True
        failure.recovery_attempts = 0
        step = failed_step(failure, self.state)
        if step is not None and not step.is_completed():
            step.status = StepStatus.RETRY_PENDING

    def _rerun(self, step: Step) -> None:
        step.status = StepStatus.RETRY_PENDING
        failure = self.state.open_failure_for_step(step.id)
        if failure is not None:
            failure.recovery_attempts = 0

    def _modify_target(self, failure: Failure | None) -> Step | None:
        if failure is not None:
            return failed_step(failure, self.state)
        current, plan = self.state.current_step, self.state.current_plan
        if current is not None and plan is not None:  # the plan's own step, even after a revision copied it
            return plan.get_step(current.id) or current
        return current

    def _check_modifications(self, modifications: Any) -> None:
        """Refuse a MODIFY that cannot be applied, before anything is recorded."""
        problem = modifications_problem(modifications)
        if problem is not None:
            raise ValueError(problem)
        if "step" in modifications:
            pending = self.state.metadata.get(_PENDING) or {}
            failure = self.state.get_failure(pending.get("failure_id", ""))
            if self._modify_target(failure) is None:
                raise ValueError("modifications['step'] given but the run has no failed or current step to change")
        if "plan" in modifications:
            self._check_plan_changes(modifications["plan"])

    def _check_plan_changes(self, changes: dict[str, Any]) -> None:
        plan = self.state.current_plan
        if plan is None:
            raise ValueError("modifications['plan'] given but the run has no plan yet; change its context instead")
        problem = plan_changes_problem(plan, changes)
        if problem is not None:
            raise PlanValidationError(problem)

    def _modify(self, modifications: dict[str, Any], target: Step | None) -> None:
        state = self.state
        if "context" in modifications and state.context is not None:
            state.context.initial_context.update(modifications["context"])
        if "plan" in modifications and state.current_plan is not None:
            plan, changes = state.current_plan, modifications["plan"]
            for step_id in changes.get("skip", []):
                step = plan.get_step(step_id)
                if step is not None and not step.is_completed():
                    step.status = StepStatus.SKIPPED
                    open_failure = state.open_failure_for_step(step_id)
                    if open_failure is not None:
                        open_failure.mark_recovered()
                        open_failure.context["resolution"] = "skipped by reviewer"
            plan.steps.extend(_new_step(spec) for spec in changes.get("add", []))
            plan.version += 1
        fields = modifications.get("step")
        if fields and target is not None:
            if "description" in fields:
                target.description = str(fields["description"])
            target.metadata.update(fields.get("metadata", {}))
            if "output" in fields:
                target.output = fields["output"]
                target.status = StepStatus.VERIFIED_COMPLETED
                target.metadata["output_source"] = "reviewer"


def modifications_problem(modifications: Any) -> str | None:
    """Why MODIFY cannot take ``modifications``, judged on their shape alone, else None.

    Needs no run, so a vote can be refused when it is cast rather than when
    the run resumes; ``resume`` checks the same and then what needs the run
    (that the step exists, that skipped ids are in the plan).
    """
    if not isinstance(modifications, dict) or not modifications:
        return f"MODIFY needs a non-empty modifications dict with keys {MODIFY_KEYS}"
    unknown = sorted(set(modifications) - set(MODIFY_KEYS))
    if unknown:
        return f"unknown modification key(s) {unknown}; use {MODIFY_KEYS}"
    if "context" in modifications and not isinstance(modifications["context"], dict):
        return "modifications['context'] must be a dict merged into the initial context"
    if "step" in modifications:
        fields = modifications["step"]
        if not isinstance(fields, dict) or not fields:
            return f"modifications['step'] must be a dict with keys from {_STEP_KEYS}"
        extra = sorted(set(fields) - set(_STEP_KEYS))
        if extra:
            return f"modifications['step'] cannot change {extra}; use keys from {_STEP_KEYS}"
        if "metadata" in fields and not isinstance(fields["metadata"], dict):
            return "modifications['step']['metadata'] must be a dict"
    if "plan" in modifications:
        return _plan_changes_shape_problem(modifications["plan"])
    return None


def plan_changes_problem(plan: Plan, changes: Any) -> str | None:
    """Why MODIFY's ``plan`` changes cannot apply to ``plan``, else None.

    ``skip`` must name steps the plan has; each added step needs a new id and
    may depend only on the plan's steps and the steps added before it, so the
    changed plan has no cycle and no dangling dependency. ``resume`` refuses
    with this; a vote path can refuse a vote with it while the run waits.
    """
    problem = _plan_changes_shape_problem(changes)
    if problem is not None:
        return problem
    ids = [step.id for step in plan.steps]
    unknown = [step_id for step_id in changes.get("skip", []) if step_id not in ids]
    if unknown:
        return (f"plan.skip names step(s) the run's plan does not have: {', '.join(unknown)}; "
                f"its steps: {', '.join(ids)}")
    for spec in changes.get("add", []):
        if spec["id"] in ids:
            return f"plan.add: a step {spec['id']!r} is already in the plan; its steps: {', '.join(ids)}"
        missing = [dep for dep in spec.get("dependencies", []) if dep not in ids]
        if missing:
            return (f"plan.add: step {spec['id']!r} depends on unknown step(s) {', '.join(missing)}; "
                    f"its steps: {', '.join(ids)}")
        ids.append(spec["id"])
    return None


def _plan_changes_shape_problem(changes: Any) -> str | None:
    if not isinstance(changes, dict) or not changes or set(changes) - {"skip", "add"}:
        return "modifications['plan'] must be {'skip': [step ids], 'add': [steps]} (either or both)"
    skip = changes.get("skip", [])
    if not isinstance(skip, list) or not all(isinstance(s, str) for s in skip):
        return f"modifications['plan']['skip'] must be a list of step ids, got {skip!r}"
    add = changes.get("add", [])
    if not isinstance(add, list):
        return f"modifications['plan']['add'] must be a list of steps, got {type(add).__name__}"
    for spec in add:
        if not isinstance(spec, dict) or not isinstance(spec.get("id"), str) or not spec["id"]:
            return f"an added step needs at least a string 'id', got {spec!r}"
        deps = spec.get("dependencies", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            return f"added step {spec['id']!r}: dependencies must be a list of step ids, got {deps!r}"
    return None


def _new_step(spec: dict[str, Any]) -> Step:
    """An added step; ``modifications_problem`` has checked its shape."""
    return Step(
        id=spec["id"],
        description=str(spec.get("description", "")),
        dependencies=list(spec.get("dependencies", [])),
    )
