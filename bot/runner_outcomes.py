"""The runner's outcomes: resume the run of a decided review with its decision, exactly once.

A mixin of ``bot.runner.Runner``, kept apart so the runner stays about
starting, settling and recovering runs; it uses the runner's lock, claims,
run threads and engines. The engine records a decision in the run's snapshot
before acting on it, so an outcome found in ``state.decisions`` is not
applied again; an outcome that cannot be applied fails the run and the
review once, instead of being retried by every tick.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from loop_engine.engine import LoopEngine
from loop_engine.errors import RunInterrupted
from loop_engine.types import LoopResult, LoopState

from bot.config import BotConfig
from bot.desk.desk import ReviewDesk, outcome_text
from bot.reviews import Review, mark_applied, mark_failed
from bot.run_report import history_text, write_run_markdown
from bot.runner_control import explained
from bot.store.base import CorruptDocumentError, RunRecord, Store, StoreError

__all__ = ["ApplyOutcomesMixin"]

log = logging.getLogger("bot.runner")


class ApplyOutcomesMixin:
    """``apply_decided`` and ``apply_outcome`` for ``Runner``; the attributes and methods below are the runner's."""

    _config: BotConfig
    _store: Store
    _desk: ReviewDesk
    _clock: Callable[[], datetime]
    _lock: threading.Lock
    _run_threads: dict[str, threading.Thread]
    _stopping: bool

    if TYPE_CHECKING:  # the runner's own, which these methods call
        def _spawn(self, run_id: str, job: Callable[[], None]) -> bool:
            ...

        def _engine(self, run: RunRecord) -> LoopEngine:
            ...

        def _finish(self, run: RunRecord, status: str, reason: str | None,
                    result: dict[str, Any] | None = None) -> None:
            ...

        def _settle(self, run_id: str, result: LoopResult, state: LoopState) -> None:
            ...


    def apply_decided(self, review_id: str) -> bool:
        """Resume the run of a decided review in a run thread; False if it is busy or not decided.

        Busy includes claimed by another replica (``Store.claim_run``): the
        thread reads the review again once it holds the claim, so of a vote
        applied at once here and another replica's tick applying the same
        review, one applies it and the other finds it applied.
        """
        review = self._store.get_review(review_id)
        if review.status != "decided":
            return False
        with self._lock:
            if self._stopping or review.run_id in self._run_threads:
                return False
            return self._spawn(review.run_id, lambda: self.apply_outcome(review.id))

    def apply_outcome(self, review_id: str) -> None:
        """Resume the run of a decided review in this thread (apply_decided runs it in a run thread)."""
        review = self._store.get_review(review_id)
        if review.status != "decided" or review.outcome is None:
            return
        run = self._store.get_run(review.run_id)
        try:
            loaded = self._store.load_state(run.id)
            if loaded is None:
                raise ValueError(f"run {run.id} has no snapshot to resume review {review.id} from")
            state = loaded
        except (CorruptDocumentError, ValueError) as err:  # CorruptStateError and SchemaVersionError are ValueErrors
            # Retrying cannot mend a damaged snapshot: the outcome fails once, saying which file.
            self._outcome_refused(review, run.id, err)
            return
        response = None
        pending = state.pending_review
        already = any(d.checkpoint_id == review.checkpoint_id for d in state.decisions)
        if pending is not None and pending.checkpoint_id == review.checkpoint_id and not already:
            response = review.outcome.to_response(review.checkpoint_id)
        log.info("applying review %s to run %s: %s", review.id, run.id, outcome_text(review))
        try:
            # Built before the run is marked running: a loop gone from the config, or one whose
            # factory now fails, refuses the outcome once instead of leaving it decided for every tick.
            engine = self._engine(run)
            self._store.update_run(run.id, lambda r: self._finish(r, "running", None))
            result, final = asyncio.run(engine.continue_saved(state, response)), engine.state
        except (RunInterrupted, StoreError):
            raise  # shutdown, or a store to retry later: the review stays decided
        except Exception as err:  # refused (e.g. a change it cannot make) or crashed: either way, once
            self._outcome_refused(review, run.id, err)
            return
        if history := history_text(review):  # the audit trail: every vote, pauses included, with its time
            self._desk.update(review, history)
        self._desk.update(review, outcome_text(review))
        self._store.update_review(review.id, lambda r: mark_applied(r, now=self._clock()))
        self._settle(run.id, result, final)

    def _outcome_refused(self, review: Review, run_id: str, err: Exception) -> None:
        """Fail the run, then the review, once: a decided review left as it is would be retried every tick.

        In that order, so a crash between the two leaves a decided review
        that the next tick refuses again, never a failed review on a live run.
        """
        outcome = review.outcome
        assert outcome is not None
        who = "its timeout default" if outcome.timed_out else outcome.by
        reason = (
            f"review {review.id}'s {outcome.decision.name.lower()} could not be applied: {err}"
            f" (voted by {who} at {outcome.decided_at.isoformat(timespec='seconds')})"
        )
        log.error("run %s failed: %s", run_id, reason, exc_info=None if explained(err) else err)
        self._store.update_run(run_id, lambda r: self._finish(r, "failed", reason))

        def fail(stored: Review) -> Review:
            mark_failed(stored, reason)
            return stored

        failed = self._store.update_review(review.id, fail)
        if history := history_text(failed):
            self._desk.update(failed, history)
        self._desk.update(failed, f"Failed: {reason}")
        write_run_markdown(self._config.state_dir, self._store, run_id, [review.checkpoint_id])
