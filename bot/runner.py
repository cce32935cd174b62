"""When runs start, pause, resume and end: the bot's side of a loop's life.

Each run executes in its own run thread with its own asyncio loop, so the
HTTP server and the tick stay responsive while a loop works. The store is the
only memory: a run is a ``RunRecord`` plus the engine's snapshot, a pause is a
``Review`` stored *before* any channel hears of it, and an outcome is applied
exactly once - the engine records the decision in the snapshot before acting
on it, so a decision already in ``state.decisions`` is never applied again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from datetime import datetime, UTC
from typing import Any

from loop_engine.checkpoint import HumanDecision, ReviewRequest
from loop_engine.engine import LoopEngine
from loop_engine.errors import RunInterrupted
from loop_engine.types import LoopResult, LoopState, LoopStatus

from bot.config import BotConfig, ReviewConfig
from bot.desk.desk import ReviewDesk
from bot.review_records import Review
from bot.run_report import result_text, write_run_markdown
from bot.runner_control import ACTIVE_STATUSES, RunControlMixin, explained
from bot.runner_outcomes import ApplyOutcomesMixin
from bot.store.base import NO_CLAIM, Claim, CorruptDocumentError, RunRecord, RunStore, Store, StoreError
from bot.loop_catalog import LoopBuildError, LoopCatalog, UnknownLoopError
from bot.run_summary import result_summary
from bot.snapshots import ClaimLost, StoppedForShutdown

__all__ = ["Runner", "ACTIVE_STATUSES", "active_run", "utcnow"]

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


def active_run(store: RunStore, loop: str) -> RunRecord | None:
    """The run holding ``loop``'s one active slot in ``store``, if any."""
    return store.active_run(loop)


class Runner(ApplyOutcomesMixin, RunControlMixin):
    """Starts runs, opens reviews at pauses, applies outcomes, recovers after a restart."""

    def __init__(
        self,
        config: BotConfig,
        store: Store,
        desk: ReviewDesk,
        *,
        catalog: LoopCatalog | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._config = config
        self._store = store
        self._desk = desk
        self._catalog = catalog or LoopCatalog(config)
        self._clock = clock
        self._lock = threading.Lock()
        self._run_threads: dict[str, threading.Thread] = {}  # run id -> the thread running it
        self._claims: dict[str, Claim] = {}  # run id -> the store's claim its thread (or a new run) holds
        self._unrecorded: dict[str, str] = {}  # run id -> why its end could not be written (healthz says so)
        self._cancels: dict[str, str] = {}  # run id -> "cancelled by ...": its thread stops at the next boundary
        self._stopping = False

    # -- starting runs -------------------------------------------------------------

    def active_run(self, loop: str) -> RunRecord | None:
        """The run holding ``loop``'s one active slot, if any (the CLI names it when it starts nothing)."""
        return active_run(self._store, loop)

    def _new_run(self, loop: str, trigger: str) -> RunRecord | None:
        """Create the run record, or None when the loop's one slot is taken (overlap: skip)."""
        loop_config = self._catalog.loop_config(loop)
        active = self.active_run(loop)
        if active is not None and loop_config.overlap != "allow":
            waiting = f" on review {active.review_id}" if active.review_id else ""
            log.info(
                "skipped a %s run of loop %s: run %s is still %s%s (overlap: skip)",
                trigger, loop, active.id, active.status, waiting,
            )
            return None
        now = self._clock()
        run_id = self._store.next_id(f"{loop}-run")
        # claimed before it is stored: another replica's recovery must not take a run nobody has started yet
        claim = self._store.claim_run(run_id)
        if claim is None:
            raise StoreError(f"run {run_id} is claimed by another process before it was even stored")
        self._claims[run_id] = claim
        run = RunRecord(id=run_id, loop=loop, status="running", created_at=now, updated_at=now, trigger=trigger)
        try:
            self._store.put_run(run)
        except BaseException:
            self._release(run_id)
            raise
        log.info("run %s of loop %s started (%s)", run.id, loop, trigger)
        return run

    def request_run(self, loop: str, *, trigger: str) -> str | None:
        """Start a run in a run thread; the run id, or None if skipped or shutting down."""
        with self._lock:
            if self._stopping:
                log.info("not starting loop %s: the bot is shutting down", loop)
                return None
            run = self._new_run(loop, trigger)
            if run is None:
                return None
            self._spawn(run.id, lambda: self._start(run))
            return run.id

    def run_foreground(self, loop: str, *, trigger: str = "cli") -> RunRecord | None:
        """Run in this thread until the run completes, pauses, fails or is stopped (the CLI without a server).

        The same boundary as a run thread's: a crash is recorded on the run as
        failed, never left "running" to block the loop's next run. After
        ``request_stop`` (Ctrl-C) the run stops at its next step boundary and
        stays "running" with its snapshot saved, for `serve` to continue.
        """
        with self._lock:
            run = self._new_run(loop, trigger)
        if run is None:
            return None
        try:
            self._start(run)
        except RunInterrupted as stop:
            if run.id not in self._cancels:
                log.info("%s; `loopbot serve` continues it", stop)
        except Exception as err:
            log.exception("run %s stopped by an internal error", run.id)
            self._fail(run.id, f"internal error: {err!r}")
        finally:
            try:
                self._cancelled_at_boundary(run.id)
            finally:
                self._release(run.id)
        return self._store.get_run(run.id)

    def _engine(self, run: RunRecord) -> LoopEngine:
        """A fresh engine for ``run``: it stops between steps at shutdown, and before a write once its claim is lost."""
        claim = self._claims.get(run.id, NO_CLAIM)
        return self._catalog.new_engine(run.loop, run.id, self._store,
                                        stop_requested=lambda: self._stopping or run.id in self._cancels,
                                        claim_held=claim.held)

    def _start(self, run: RunRecord) -> None:
        try:
            engine = self._engine(run)
            context = self._catalog.new_context(run.loop)
        except LoopBuildError as err:  # the config names a loop that cannot be built: the run fails, saying why
            log.error("run %s failed: %s", run.id, err, exc_info=None if err.expected else err)
            self._fail(run.id, str(err))
            return
        result = asyncio.run(engine.run(context, trace_id=run.id))
        self._settle(run.id, result, engine.state)

    # -- run threads ---------------------------------------------------------------

    def _spawn(self, run_id: str, job: Callable[[], None]) -> bool:
        """Run ``job`` in a run thread for ``run_id`` (the caller holds the lock and checked it is free).

        The thread holds the store's claim on the run (taken here unless a new
        run already holds it) until it stops; False, and nothing started, while
        another process holds it (another replica runs it).
        """
        if run_id not in self._claims:
            claim = self._store.claim_run(run_id)
            if claim is None:
                log.debug("run %s is claimed by another replica; left to it", run_id)
                return False
            self._claims[run_id] = claim
        thread = threading.Thread(target=self._in_run_thread, args=(run_id, job), name=f"run:{run_id}", daemon=True)
        self._run_threads[run_id] = thread
        thread.start()
        return True

    def _release(self, run_id: str) -> None:
        claim = self._claims.pop(run_id, None)
        if claim is not None:
            claim.release()

    def _in_run_thread(self, run_id: str, job: Callable[[], None]) -> None:
        try:
            try:
                job()
            except ClaimLost as lost:  # replicas: nothing more written; whoever claims the run next goes on
                log.warning("%s", lost)
            except StoppedForShutdown as stop:  # shutdown: the snapshot is saved between steps; the next start goes on
                if run_id not in self._cancels:
                    log.info("%s; it continues at the next start", stop)
            except (UnknownLoopError, LoopBuildError) as err:  # the loop left the config, or no longer builds
                log.error("run %s cannot continue: %s", run_id, err, exc_info=None if explained(err) else err)
                self._fail(run_id, str(err))
            except Exception as err:  # the run thread's boundary: record the crash on the run, keep the bot up
                log.exception("run %s stopped by an internal error", run_id)
                self._fail(run_id, f"internal error: {err!r}")
            self._cancelled_at_boundary(run_id)
        except (OSError, StoreError) as err:  # not even the failure could be written (a full or read-only disk)
            what = f"run {run_id} stopped and its end could not be recorded ({err}); it stays `running`"
            log.critical("%s: fix the disk, then restart `loopbot serve`, which continues it", what)
            with self._lock:
                self._unrecorded[run_id] = what
        finally:
            with self._lock:
                self._run_threads.pop(run_id, None)
                self._release(run_id)

    def problem(self) -> str | None:
        """Why this runner cannot be trusted with its runs (one stopped and could not say so), else None."""
        with self._lock:
            stuck = list(self._unrecorded.values())
        if not stuck:
            return None
        more = f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""
        return stuck[0] + more

    def _fail(self, run_id: str, reason: str) -> None:
        self._store.update_run(run_id, lambda run: self._finish(run, "failed", reason))
        self._tell_end(run_id, "failed", reason)

    # -- settling a result ---------------------------------------------------------

    def _finish(self, run: RunRecord, status: str, reason: str | None, result: dict[str, Any] | None = None) -> None:
        run.status, run.reason, run.updated_at = status, reason, self._clock()
        if result is not None:
            run.result = result
            run.iterations = result.get("iterations", run.iterations)

    def _settle(self, run_id: str, result: LoopResult, state: LoopState) -> None:
        """Record where a run stopped: a pause opens (or finds) its review; an end sets the status."""
        summary = result_summary(result)
        if result.status is LoopStatus.PAUSED:
            request = result.review_request or state.pending_review
            if request is None:
                raise RuntimeError(f"run {run_id} paused without a review request; its snapshot is inconsistent")
            review = self._open_review(run_id, request)

            def wait(run: RunRecord) -> None:
                self._finish(run, "waiting", None, summary)
                run.review_id = review.id

            self._store.update_run(run_id, wait)
            self._post(review)
            return
        if result.status is LoopStatus.COMPLETED:
            status, reason = "completed", None
        elif state.decisions and state.decisions[-1].decision is HumanDecision.REJECT:
            status, reason = "rejected", state.decisions[-1].feedback or result.reason
        else:
            status, reason = "failed", result.reason or state.stop_reason
        if words := self._catalog.summary(self._store.get_run(run_id).loop, result):
            summary["summary"] = words
        self._store.update_run(run_id, lambda run: self._finish(run, status, reason, summary))
        log.info("run %s %s%s", run_id, status, f": {reason}" if reason else "")
        self._tell_end(run_id, status, reason, (d.checkpoint_id for d in state.decisions))

    def _tell_end(self, run_id: str, status: str, reason: str | None, checkpoints: Iterable[str] = ()) -> None:
        """How the run ended: one line (with its result) where its last review was posted, and its own file.

        A review that cannot be read (a damaged row) has nowhere to be told: the run's own file still is.
        """
        try:
            review = self._store.review_for_run(run_id)
        except CorruptDocumentError as err:
            log.warning("run %s %s; its review cannot be read to tell it there: %s", run_id, status, err)
            review = None
        result = result_text(self._store.get_run(run_id).result)
        if review is not None:
            line = f"Run {run_id} {status}" + (f": {reason}" if reason else ".")
            if reason and reason.startswith(status):  # "cancelled by ...": said once
                line = f"Run {run_id} {reason}."
            self._desk.update(review, line + (f" Result: {result}" if result else ""))
        write_run_markdown(self._config.state_dir, self._store, run_id, checkpoints)

    def _open_review(self, run_id: str, request: ReviewRequest) -> Review:
        """The review for this pause, stored before anyone is told; found again after a crash."""
        found = self._store.review_for_run(run_id, request.checkpoint_id)
        if found is not None:
            return found
        run = self._store.get_run(run_id)
        policy = self._catalog.loop_config(run.loop).review.to_policy()
        review = Review(
            id=self._store.next_id(run.loop),
            loop=run.loop,
            run_id=run_id,
            checkpoint_id=request.checkpoint_id,
            request=request.to_dict(),
            policy=policy,
            created_at=self._clock(),
            status="open",
        )
        self._store.put_review(review)
        log.info("run %s paused at %s: review %s opened", run_id, request.checkpoint_id, review.id)
        return review

    def _review_config(self, loop: str) -> ReviewConfig:
        """The loop's review block; a loop gone from the config gets no targets beyond the local channel."""
        try:
            return self._catalog.loop_config(loop).review
        except UnknownLoopError:
            return ReviewConfig()

    def _post(self, review: Review) -> None:
        self._desk.open(review, self._review_config(review.loop).post_to)

    # -- restart -------------------------------------------------------------------

    def recover(self, *, post: bool = True) -> None:
        """Pick up every unfinished run after a start (decided reviews are the tick's job).

        Also the leader's sweep on a shared store (``post=False``: only runs
        left "running" by a replica that died or stopped; a run another live
        process holds is left to it).
        """
        # the sweep asks for "running" only: it comes every interval, and the waiting runs are one per open review
        for run in self._store.active_runs(status=None if post else "running"):
            if run.id in self._run_threads:
                continue
            try:
                self._recover(run)
            except CorruptDocumentError as err:  # its review was unreadable and set aside: nobody can answer it
                # Failed, saying why, so the loop's one active slot is free again; problems() names the file.
                self._fail(run.id, f"its review {run.review_id} could not be read and was set aside ({err})")
            except StoreError as err:  # e.g. a newer loopbot's document: leave the run as it is, not the others
                log.error("run %s cannot be picked up: %s; the other runs go on", run.id, err)

    def _recover(self, run: RunRecord) -> None:
        if run.status == "waiting" and run.review_id:
            review = self._store.get_review(run.review_id)
            # A review with its targets recorded has its posts in the outbox (added before the targets):
            # only one stopped between being stored and being posted needs posting now.
            if review.status == "open" and not review.targets:
                log.info("run %s waits on review %s, which was never posted; posting it", run.id, review.id)
                self._post(review)
        elif run.status == "running":
            if run.review_id and self._store.get_review(run.review_id).status == "decided":
                return  # the tick resumes it with the decision
            with self._lock:
                if self._stopping or run.id in self._run_threads:
                    return
                if self._spawn(run.id, partial(self._continue, run.id)):
                    log.info("run %s was interrupted; continuing from its last snapshot", run.id)

    def _continue(self, run_id: str) -> None:
        run = self._store.get_run(run_id)  # again, under the claim: it may have moved on meanwhile
        if run.status != "running" or (run.review_id and self._store.get_review(run.review_id).status == "decided"):
            return
        state = self._store.load_state(run.id)
        if state is None:  # crashed before the first boundary: nothing to lose, start over
            self._start(run)
            return
        engine = self._engine(run)
        result, final = asyncio.run(engine.continue_saved(state)), engine.state
        self._settle(run.id, result, final)

    # -- reviews' deadlines --------------------------------------------------------

    def remind(self, review: Review, text: str) -> None:
        self._desk.update(review, text)

    def escalate(self, review: Review, text: str) -> None:
        self._desk.escalate(review, self._review_config(review.loop).timeout.escalate_to, text)

    # -- shutdown ------------------------------------------------------------------

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the current run threads; True if none is left running."""
        with self._lock:
            threads = list(self._run_threads.values())
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in threads)

    def request_stop(self) -> None:
        """Start nothing new, and let every running engine stop after its current step (saved)."""
        with self._lock:
            self._stopping = True

    def shutdown(self, timeout: float = 8.0) -> bool:
        """Stop (see ``request_stop``), wait up to ``timeout`` s for the run threads; True if all finished."""
        self.request_stop()
        with self._lock:
            names = [t.name for t in self._run_threads.values()]
        if self.join(timeout):
            return True
        log.warning("stopping with %s unfinished; they continue from their snapshots at the next start", names)
        return False
