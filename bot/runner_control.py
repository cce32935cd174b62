"""The runner's run control: cancel a run, and catch up without a server (``loopbot run`` / ``apply``).

A mixin of ``bot.runner.Runner``, kept apart so the runner stays about starting,
settling and recovering runs; it uses the runner's lock, claims and run threads.
A cancel asked for while a run thread runs the run is kept in ``_cancels``: the
engine's ``stop_requested`` sees it at the next step boundary, and the thread
ends the run ``cancelled`` when it stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from loop_engine.errors import RunInterrupted

from bot.review_records import Review
from bot.store.base import Claim, RunRecord, Store
from bot.loop_catalog import LoopBuildError, UnknownLoopError

__all__ = ["RunControlMixin", "ACTIVE_STATUSES"]

log = logging.getLogger("bot.runner")

#: Run statuses that hold a loop's one active slot (overlap: skip).
ACTIVE_STATUSES = frozenset({"running", "waiting"})


def explained(err: Exception) -> bool:
    """Whether ``err`` says all there is to say (a refusal, a loop gone or unbuildable), so no traceback."""
    if isinstance(err, LoopBuildError):
        return err.expected
    return isinstance(err, (ValueError, UnknownLoopError))


class RunControlMixin:
    """``cancel`` and ``catch_up`` for ``Runner``; the attributes and methods below are the runner's."""

    _store: Store
    _lock: threading.Lock
    _run_threads: dict[str, threading.Thread]
    _claims: dict[str, Claim]
    _cancels: dict[str, str]
    _stopping: bool

    if TYPE_CHECKING:  # the runner's own, which these methods call
        def apply_outcome(self, review_id: str) -> None:
            ...

        def _continue(self, run_id: str) -> None:
            ...

        def _release(self, run_id: str) -> None:
            ...

        def _fail(self, run_id: str, reason: str) -> None:
            ...

        def _finish(self, run: RunRecord, status: str, reason: str | None,
                    result: dict[str, Any] | None = None) -> None:
            ...

        def _tell_end(self, run_id: str, status: str, reason: str | None, checkpoints: Iterable[str] = ()) -> None:
            ...

    def catch_up(self) -> list[str]:
        """Apply every decided review and continue every interrupted run, here, one after another.

        For a process that holds the state dir without serving (`loopbot run`,
        `loopbot apply`): what a serve's tick and restart would do, so nobody
        has to start a server to move a decided run on. Each run ends where it
        next stops (completed, a new review, failed); the ids of the runs moved.
        """
        moved: list[str] = []
        for review in self._store.decided_reviews():
            if self._here(review.run_id, partial(self.apply_outcome, review.id)):
                moved.append(review.run_id)
        for run in self._store.active_runs():
            interrupted = run.status == "running" and run.id not in moved and not self._stopping
            if interrupted and self._here(run.id, partial(self._continue, run.id)):
                log.info("run %s was interrupted; continued from its last snapshot", run.id)
                moved.append(run.id)
        return moved

    def _here(self, run_id: str, job: Callable[[], None]) -> bool:
        """``job`` on ``run_id`` in this thread under its claim, with a run thread's boundary; False if not claimed."""
        with self._lock:
            if self._stopping or run_id in self._run_threads or run_id in self._claims:
                return False
            claim = self._store.claim_run(run_id)
            if claim is None:
                return False
            self._claims[run_id] = claim
        try:
            job()
        except RunInterrupted as stop:
            if run_id not in self._cancels:
                log.info("%s; it continues at the next start", stop)
        except (UnknownLoopError, LoopBuildError) as err:
            log.error("run %s cannot continue: %s", run_id, err, exc_info=None if explained(err) else err)
            self._fail(run_id, str(err))
        except Exception as err:
            log.exception("run %s stopped by an internal error", run_id)
            self._fail(run_id, f"internal error: {err!r}")
        finally:
            try:
                self._cancelled_at_boundary(run_id)
            finally:
                with self._lock:
                    self._release(run_id)
        return True


    # -- cancelling ----------------------------------------------------------------

    def cancel(self, run_id: str, by: str, reason: str = "") -> str:
        """Cancel ``run_id`` for ``by`` (who may was checked by the caller); what became of it, in words.

        A run a thread of this process is running stops at its next step
        boundary (its snapshot saved) and then ends ``cancelled``; any other
        active run - waiting on a review, or left ``running`` by a stopped
        process - ends now, under the store's claim on it, its review
        closed as "cancelled by ...". ``UnknownRunError`` for no such run,
        ``ValueError`` (the words for the sender) when it has ended or
        another replica is working on it.
        """
        why = f"cancelled by {by}" + (f": {reason}" if reason.strip() else "")
        with self._lock:  # held throughout: no run thread may start on the run while it is being ended here
            run = self._store.get_run(run_id)
            if run.status not in ACTIVE_STATUSES:
                raise ValueError(f"run {run_id} has already ended ({run.status}); there is nothing to cancel")
            if run_id in self._run_threads:
                self._cancels[run_id] = why
                log.info("run %s: %s; it stops at its next step boundary", run_id, why)
                return f"run {run_id} stops at its next step boundary, then ends cancelled ({why})"
            claim = self._store.claim_run(run_id)
            if claim is None:
                raise ValueError(f"run {run_id} is being worked on by another replica right now; try again in a minute")
            self._claims[run_id] = claim
            try:
                self._end_cancelled(run_id, why)
            finally:
                self._release(run_id)
        return f"run {run_id} cancelled ({why})"

    def _cancelled_at_boundary(self, run_id: str) -> None:
        """After a run thread stopped: a cancel asked for while it ran ends the run, if it has not ended already."""
        with self._lock:
            why = self._cancels.pop(run_id, None)
        if why is not None and self._store.get_run(run_id).status in ACTIVE_STATUSES:
            self._end_cancelled(run_id, why)

    def _end_cancelled(self, run_id: str, why: str) -> None:
        """Close the run's undecided or unapplied review, end the run ``cancelled``, tell every message."""
        review = self._store.review_for_run(run_id)
        if review is not None and review.status in ("open", "decided"):
            def close(stored: Review) -> None:
                stored.status, stored.error = "cancelled", why

            self._store.update_review(review.id, close)
        self._store.update_run(run_id, lambda run: self._finish(run, "cancelled", why))
        log.info("run %s %s", run_id, why)
        self._tell_end(run_id, "cancelled", why)

