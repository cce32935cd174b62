"""Human checkpoints: when a loop stops to ask, what it asks, and recording the answer.

``HumanCheckpoint`` decides *when* (``should_pause``), turns the state into a
``ReviewRequest`` (``present_for_review``) and records the ``ReviewResponse``
(``record_decision``). It never runs the loop and never decides by itself:
the engine applies decisions, and ``await_decision`` without a handler
raises instead of approving.

Everything that must survive a restart lives in ``LoopState``, not on this
object: the checkpoint counter (ids never repeat within a run, across
processes) and the reviewed causes (each trigger fires once per cause).
Cause keys: ``failure:<id>`` (ON_FAILURE), ``major_failure:<id>``
(ON_MAJOR_FAILURE, which also settles ``failure:<id>``), ``plan:<id>:v<n>``,
``iteration:<n>``, ``cost:<threshold>``, ``external:<uuid>``.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from .atomic import atomic_write_text
from .checkpoint_config import CheckpointConfig, CheckpointPresets
from .errors import CheckpointError, NoDecisionHandlerError
from .ids import validate_trace_id
from .plug_points import DecisionHandler
from .proposal import Proposal
from .review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
from .types import Failure, FailureStatus, LoopState

__all__ = [
    "CheckpointTrigger",
    "HumanDecision",
    "ReviewRequest",
    "ReviewResponse",
    "CheckpointConfig",
    "CheckpointPresets",
    "HumanCheckpoint",
]

#: Order of ``should_pause``: the most serious reason to stop wins.
_PRIORITY = (
    CheckpointTrigger.ON_MAJOR_FAILURE,
    CheckpointTrigger.ON_FAILURE,
    CheckpointTrigger.ON_EXTERNAL_REQUEST,
    CheckpointTrigger.ON_COST_THRESHOLD,
    CheckpointTrigger.ON_PLAN_COMPLETE,
    CheckpointTrigger.ON_ITERATION_BOUNDARY,
)


def _is_major(failure: Failure) -> bool:
    """A failure the loop cannot get past by itself: the run would end FAILED on it."""
    if failure.status is FailureStatus.RECOVERED:
        return False
    # Used-up attempts alone are not major: the last retry may still be running
    # and pass. The engine marks a failure TERMINAL before it would end the run.
    return failure.status in (FailureStatus.TERMINAL, FailureStatus.RECOVERY_FAILED) or not failure.recoverable


class HumanCheckpoint:
    """Decides when a loop asks a human, and records what was asked and answered.

    ``now`` is injectable so tests and replays control request timestamps.
    """

    def __init__(
        self,
        config: CheckpointConfig | None = None,
        decision_handler: DecisionHandler | None = None,
        *,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.config = config if config is not None else CheckpointConfig()
        self.decision_handler = decision_handler
        self._now = now
        self._external: list[tuple[str, str]] = []  # (cause key, reason), oldest first
        self._details: dict[str, Proposal] = {}  # cause key -> what the loop proposes, until presented
        self._anonymous_prefix = f"run-{uuid.uuid4().hex[:12]}"
        self._record_bases: dict[str, Path] = {}  # checkpoint id -> where its record was written

    # --- when -----------------------------------------------------------------

    def request_review(self, reason: str, details: Proposal | None = None) -> str:
        """Ask for a review at the next check; returns the cause key it will settle.

        ``details`` is what approving does, as data (``loop_engine.proposal``):
        it travels in the ``ReviewRequest`` (and its snapshots) as ``proposal``.
        The request is an in-process signal kept on this object until it is
        presented; once presented, its cause is in the state like any other.
        """
        if details is not None and not isinstance(details, Proposal):
            raise TypeError(
                f"request_review(details=...) takes a loop_engine.proposal.Proposal, got {type(details).__name__}"
            )
        cause = f"external:{uuid.uuid4().hex}"
        self._external.append((cause, reason))
        if details is not None:
            self._details[cause] = details
        return cause

    def should_pause(self, state: LoopState) -> CheckpointTrigger | None:
        """The trigger that wants a human now, or None. Does not change ``state``."""
        if not self.config.enabled:
            return None
        for trigger in _PRIORITY:
            if self._pending_cause(state, trigger) is not None:
                return trigger
        return None

    def _pending_cause(self, state: LoopState, trigger: CheckpointTrigger) -> tuple[str, dict[str, Any]] | None:
        """The first unreviewed cause for ``trigger`` with its context, if the trigger is on."""
        config, reviewed = self.config, set(state.reviewed_causes)
        if trigger is CheckpointTrigger.ON_FAILURE and config.trigger_on_failure:
            for failure in state.failures:
                cause = f"failure:{failure.failure_id}"
                if failure.status is not FailureStatus.RECOVERED and cause not in reviewed:
                    return cause, _failure_context(failure)
        elif trigger is CheckpointTrigger.ON_MAJOR_FAILURE and config.trigger_on_major_failure:
            for failure in state.failures:
                cause = f"major_failure:{failure.failure_id}"
                if _is_major(failure) and cause not in reviewed:
                    return cause, _failure_context(failure)
        elif trigger is CheckpointTrigger.ON_PLAN_COMPLETE and config.trigger_on_plan_complete:
            plan = state.current_plan
            if plan is not None and plan.is_complete():
                cause = f"plan:{plan.id}:v{plan.version}"
                if cause not in reviewed:
                    return cause, {"plan_id": plan.id, "plan_version": plan.version}
        elif trigger is CheckpointTrigger.ON_ITERATION_BOUNDARY and config.trigger_every_n_iterations:
            n = config.trigger_every_n_iterations
            boundary = (state.current_iteration // n) * n
            cause = f"iteration:{boundary}"
            if boundary > 0 and cause not in reviewed:
                return cause, {"iteration_boundary": boundary}
        elif trigger is CheckpointTrigger.ON_COST_THRESHOLD and config.trigger_cost_threshold is not None:
            cost = state.context.budget.cost_used if state.context is not None else 0.0
            cause = f"cost:{config.trigger_cost_threshold}"
            if cost >= config.trigger_cost_threshold and cause not in reviewed:
                return cause, {"cost_used": cost, "cost_threshold": config.trigger_cost_threshold}
        elif trigger is CheckpointTrigger.ON_EXTERNAL_REQUEST:
            for cause, reason in self._external:
                if cause not in reviewed:
                    return cause, {"reason": reason}
        return None

    # --- what -----------------------------------------------------------------

    def present_for_review(
        self,
        state: LoopState,
        trigger: CheckpointTrigger,
        proposed_action: str = "Escalate to human",
        *,
        failure: Failure | None = None,
    ) -> ReviewRequest:
        """Turn the state into a request, mark its cause reviewed and open it on the state.

        ``failure`` names the failure the request is about when the caller chose
        it (a HUMAN_HANDOFF): its cause is then marked reviewed whatever the
        triggers say, so the same failure is not put to a human again at the
        next boundary. Writes ``<checkpoint_dir>/<trace>_<checkpoint_id>.md``
        and ``.json`` when ``save_checkpoints`` is on, never over an earlier record.
        """
        pending = (
            (f"major_failure:{failure.failure_id}", _failure_context(failure))
            if failure is not None
            else self._pending_cause(state, trigger)
        )
        cause, context = pending if pending is not None else ("", {})
        checkpoint_id = f"checkpoint_{state.checkpoint_counter + 1:04d}"
        # write the record first: a path that cannot be written fails before the state changes
        base = self._record_path(state, checkpoint_id, (".json", ".md")) if self.config.save_checkpoints else None
        request = ReviewRequest(
            checkpoint_id=checkpoint_id,
            trigger=trigger,
            state_summary=_summary(state),
            proposed_action=proposed_action,
            context={"goal": state.context.goal, **context} if state.context else context,
            timestamp=self._now(),
            cause=cause,
            proposal=self._details.get(cause),
        )
        if base is not None:
            self._record_bases[checkpoint_id] = base
            self.refresh_record(request)
        state.checkpoint_counter += 1
        if cause:
            state.reviewed_causes.append(cause)
            if cause.startswith("major_failure:"):
                plain = "failure:" + cause.removeprefix("major_failure:")
                if plain not in state.reviewed_causes:
                    state.reviewed_causes.append(plain)
            self._external = [(c, r) for c, r in self._external if c != cause]
            self._details.pop(cause, None)
        state.pending_review = request
        return request

    def refresh_record(self, request: ReviewRequest) -> None:
        """(Re)write the saved record of ``request``, e.g. once the engine shows the run as waiting.

        Does nothing for a request this checkpoint did not record.
        """
        base = self._record_bases.get(request.checkpoint_id)
        if base is not None:
            atomic_write_text(f"{base}.json", request.to_json())
            atomic_write_text(f"{base}.md", request.to_markdown())

    def _record_path(self, state: LoopState, checkpoint_id: str, suffixes: tuple[str, ...]) -> Path:
        """``<checkpoint_dir>/<trace>_<checkpoint_id>`` (or ``-2``, ``-3``...) with no file of ``suffixes`` yet.

        A run that reused a trace id keeps the earlier run's records. Both parts
        must be safe file names: a checkpoint id may come from a chat message.
        """
        run = validate_trace_id(state.trace_id) if state.trace_id else self._anonymous_prefix
        stem = f"{run}_{validate_trace_id(checkpoint_id, 'checkpoint id')}"
        directory = Path(self.config.checkpoint_dir)
        candidate, n = stem, 1
        while any((directory / f"{candidate}{suffix}").exists() for suffix in suffixes):
            n += 1
            candidate = f"{stem}-{n}"
        return directory / candidate

    # --- the answer -----------------------------------------------------------

    async def await_decision(self, request: ReviewRequest) -> ReviewResponse:
        """Ask ``decision_handler`` (sync or async); never approve without one."""
        if self.decision_handler is None:
            raise NoDecisionHandlerError(
                f"checkpoint {request.checkpoint_id} needs a human decision but no decision_handler is set; "
                "pass HumanCheckpoint(config, decision_handler=...) or stop here and resume the run with "
                "engine.resume(state, ReviewResponse(...)) once someone has decided"
            )
        response = self.decision_handler(request)
        if inspect.isawaitable(response):
            response = await response
        if not isinstance(response, ReviewResponse):
            raise CheckpointError(
                f"decision_handler returned {type(response).__name__}, expected a ReviewResponse "
                f"for {request.checkpoint_id}"
            )
        if response.checkpoint_id != request.checkpoint_id:
            raise CheckpointError(
                f"decision_handler answered {response.checkpoint_id!r} but was asked about {request.checkpoint_id!r}"
            )
        return response

    def record_decision(self, state: LoopState, response: ReviewResponse) -> None:
        """Append the decision to the state; close the open review unless it is PAUSE.

        Refuses (``ValueError``) an answer to a review other than the open one.
        Saves ``<trace>_<checkpoint_id>.response.json`` when ``save_checkpoints`` is on.
        """
        open_review = state.pending_review
        if open_review is not None and response.checkpoint_id != open_review.checkpoint_id:
            raise ValueError(
                f"response is for {response.checkpoint_id!r} but the open review is "
                f"{open_review.checkpoint_id!r}; answer the open review"
            )
        # refuse non-JSON modifications and unsafe ids before anything changes
        text = response.to_json()
        suffix = ".response.json"
        base = self._record_path(state, response.checkpoint_id, (suffix,)) if self.config.save_checkpoints else None
        state.decisions.append(response)
        if response.decision is not HumanDecision.PAUSE:
            state.pending_review = None
        if base is not None:
            atomic_write_text(f"{base}{suffix}", text)


def _failure_context(failure: Failure) -> dict[str, Any]:
    return {
        "failure_id": failure.failure_id,
        "failure_type": failure.type.name,
        "failure_status": failure.status.name,
        "failure_message": failure.message,
        "step_id": failure.step_id,
        "recovery_attempts": failure.recovery_attempts,
    }


def _raised_at(failure: Failure) -> dict[str, Any]:
    """``{"at": "file:line"}`` when the loop's own code raised (``evidence.raised_at``), else {}."""
    at = failure.evidence.get("raised_at") if isinstance(failure.evidence, dict) else None
    return {"at": f"{at['file']}:{at['line']}"} if isinstance(at, dict) and "file" in at and "line" in at else {}


def _summary(state: LoopState) -> dict[str, Any]:
    """The facts a reviewer needs first; the tutorial's three lead, in its order."""
    summary: dict[str, Any] = {
        "iteration": state.current_iteration,
        "status": state.status.name,
        "failures": len(state.failures),
        "execution_state": state.execution_state.value,
        "trace_id": state.trace_id,
    }
    plan = state.current_plan
    if plan is not None:
        done = sum(1 for s in plan.steps if s.is_completed())
        summary["plan_progress"] = f"{done}/{len(plan.steps)} steps done"
        if state.current_step is not None:
            summary["current_step"] = f"{state.current_step.id}: {state.current_step.description}"
    if state.context is not None:
        b = state.context.budget
        summary["cost_used"] = b.cost_used
        summary["tokens_used"] = b.tokens_used
    summary["unrecovered_failures"] = [
        {"id": f.failure_id, "type": f.type.name, "status": f.status.name, "step": f.step_id, "message": f.message,
         **_raised_at(f)}
        for f in state.failures
        if f.status is not FailureStatus.RECOVERED
    ]
    return summary
