"""The serve loop's heartbeat: what the bot does every ``poll_interval`` seconds.

One tick (1) starts the runs the CLI asked for through the store's inbox,
(2) publishes the reviews the store holds decided and not yet applied (by
``loopbot decide`` in another process, before this serve started, or a vote
whose run was busy) to ``decisions``, the hub the vote path publishes to and
the runner subscribes to, and (3) fires review deadlines: reminders,
escalations and default decisions, a decision by timeout published likewise.
Everything it learns comes from the store, so a decision made while the bot
was down is picked up by the first tick, at start.

No failure stops the ticking: one review that cannot be handled is logged
and skipped (the others still move), a failed tick is logged and the next
one runs, and the same failure repeated is logged once, not every tick.
``problem()`` tells /healthz when the ticking itself has stopped or stalled.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from adapters.durations import format_duration
from bot.desk.decisions import Decisions
from bot.review_deadlines import decide_by_timeout, due_actions
from bot.review_records import Review
from bot.runner import Runner, utcnow
from bot.store.base import Store

__all__ = ["Service", "RUN_REQUEST", "CANCEL_REQUEST", "STALE_AFTER", "STALE_TICKS"]

log = logging.getLogger(__name__)

#: The inbox request kind that asks the server to start a run: payload {"loop", "trigger"}.
RUN_REQUEST = "run"
#: The inbox request kind that asks the server to cancel a run: payload {"run", "by", "reason"}.
CANCEL_REQUEST = "cancel"

#: /healthz says 503 when no tick has completed for max(STALE_AFTER, STALE_TICKS poll intervals).
STALE_AFTER = timedelta(seconds=30)
STALE_TICKS = 10


class Service:
    """Runs ticks on a thread until stopped; ``tick()`` is also callable directly (tests)."""

    def __init__(self, store: Store, runner: Runner, *, clock: Callable[[], datetime] = utcnow,
                 leader: Any = None, lost: Callable[[], str | None] | None = None,
                 on_lost: Callable[[str], None] | None = None, decisions: Decisions | None = None) -> None:
        """``leader``: on a store shared by replicas, the ``bot.replicas.Leadership`` of this one - only
        while it leads does the tick fire deadlines (and sweep for runs to restart). None: always.

        ``lost`` says, before every tick, whether what this process holds has gone (the serve lock's
        ``lost``: its state dir deleted or replaced); then ``on_lost(reason)`` runs once and ticking ends,
        since every further write would land beside another process's state.

        ``decisions``: the hub decided reviews are published to (a serve's, shared with its vote path);
        None: one of its own with ``runner.apply_decided`` subscribed."""
        if decisions is None:
            decisions = Decisions()
            decisions.subscribe(runner.apply_decided)
        self._decisions = decisions
        self._store = store
        self._runner = runner
        self._clock = clock
        self._leader = leader
        self._lost = lost
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._interval = 1.0
        self._last_tick = clock()  # when a tick last completed (or the thread started)
        self._died: str | None = None
        self._failing: dict[str, str] = {}  # what failed -> its error, to log each failure once

    # -- one tick ------------------------------------------------------------------

    def tick(self) -> None:
        """One pass; the inbox and each review fail alone, so the rest still moves."""
        self._guarded("inbox", "run requests cannot be taken (runs asked for wait)", self.take_requests)
        # Store queries, not scans: an idle tick reads no review document (the store's index answers).
        for review in self._store.decided_reviews():
            what = f"review {review.id} could not be applied"
            self._guarded(f"review {review.id}", what, partial(self._decisions.publish, review.id))
        if self._leader is not None:
            if not self._leader.leading:
                return
            self._guarded("sweep", "interrupted runs could not be restarted", self._leader.sweep)
        for review in self._store.due_reviews(self._clock()):
            what = f"review {review.id}'s deadline could not be handled"
            self._guarded(f"review {review.id}", what, partial(self.fire_deadlines, review))

    def _guarded(self, key: str, what: str, job: Callable[[], object]) -> bool:
        """Run ``job``; log a failure with its traceback the first time, a repeat only at debug level."""
        try:
            job()
        except Exception as err:
            text = f"{type(err).__name__}: {err}"
            if self._failing.get(key) == text:
                log.debug("%s (again): %s", what, text)
            else:
                self._failing[key] = text
                log.error("%s: %s (retried every tick; logged again if the error changes)", what, text, exc_info=err)
            return False
        if self._failing.pop(key, None) is not None:
            log.info("%s works again", key)
        return True

    def take_requests(self) -> None:
        """Start the runs asked for; a request is acknowledged only once handled (at-least-once)."""
        for request in self._store.take_requests():
            if request.kind == RUN_REQUEST:
                self._start_requested(request.id, request.payload)
            elif request.kind == CANCEL_REQUEST:
                self._cancel_requested(request.id, request.payload)
            else:
                log.error("request %s has unknown kind %r; dropped", request.id, request.kind)
            self._store.finish_request(request.id)

    def _start_requested(self, request_id: str, payload: dict[str, Any]) -> None:
        """Idempotent by request id: the run's trigger names the request, so a redelivery finds it."""
        loop = str(payload.get("loop", ""))
        trigger = f"{payload.get('trigger', 'cli')} ({request_id})"
        if self._store.run_with_trigger(trigger) is not None:
            return  # handled before a crash, not yet finished
        log.info("request %s: run loop %s", request_id, loop)
        try:
            self._runner.request_run(loop, trigger=trigger)
        except LookupError as err:  # the loop left the config since the request was made
            log.error("request %s refused: %s", request_id, err)

    def _cancel_requested(self, request_id: str, payload: dict[str, Any]) -> None:
        """`loopbot cancel` beside a serve: idempotent, as a run that has ended is only logged."""
        run_id = str(payload.get("run", ""))
        try:
            done = self._runner.cancel(run_id, str(payload.get("by", "?")), str(payload.get("reason", "")))
        except (LookupError, ValueError) as err:  # no such run, or it ended meanwhile
            log.info("request %s: cancel not applied: %s", request_id, err)
            return
        log.info("request %s: %s", request_id, done)

    def fire_deadlines(self, review: Review) -> None:
        """Remind, escalate or decide by timeout - each marked in the store before it is posted."""
        now = self._clock()
        # update_review writes only when due_actions marked something, so a quiet tick costs no write.
        actions = self._store.update_review(review.id, lambda r: due_actions(r, now=now))
        if not actions:
            return
        current = self._store.get_review(review.id)
        since = review.created_at.isoformat(timespec="seconds")
        for action in actions:
            if action == "remind":
                log.info("review %s: reminder posted", review.id)
                # Channel-neutral words: each channel already shows how to answer in its own terms.
                self._runner.remind(current, f"Reminder: review {review.id} has waited for a decision since {since}")
            elif action == "escalate":
                self._runner.escalate(current, f"Escalated: review {review.id} has had no decision since {since}")
            elif action == "decide":
                outcome = self._store.update_review(review.id, lambda r: decide_by_timeout(r, now=now))
                log.warning("review %s %s", review.id, outcome.feedback)
                decided = self._store.get_review(review.id)
                if decided.status == "decided":
                    self._decisions.publish(review.id)
                else:
                    self._runner.remind(decided, outcome.feedback)

    # -- the thread ----------------------------------------------------------------

    def _loop(self, interval: float) -> None:
        try:
            while not self._stop.is_set():
                if self.held_gone():
                    return
                if self._guarded("tick", f"tick failed (next in {interval:.1f}s)", self.tick):
                    self._last_tick = self._clock()
                self._stop.wait(interval)
        except BaseException as err:  # the thread's boundary: /healthz reports the death instead of hiding it
            self._died = f"{type(err).__name__}: {err}"
            log.critical("the tick thread stopped: %s", self._died, exc_info=err)

    def held_gone(self) -> bool:
        """True (after logging one ERROR and calling ``on_lost``) when what this process holds has gone."""
        reason = self._lost() if self._lost is not None else None
        if reason is None:
            return False
        log.error("%s while this serve held it: stopping, so no second process shares its state "
                  "(a supervisor restarts serve on the directory as it is now)", reason)
        if self._on_lost is not None:
            self._on_lost(reason)
        return True

    def start(self, interval: float) -> None:
        self._interval = interval
        self._last_tick = self._clock()
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="loopbot-tick", daemon=True)
        self._thread.start()

    def problem(self) -> str | None:
        """Why the ticking is unhealthy (stopped, or no tick completed for long), else None.

        None before ``start`` and after ``stop``: only a thread that should be
        ticking can be late. A run whose end could not be written (a full disk)
        is a problem at any time: the store says "running" and no run thread runs it.
        """
        stuck = self._runner.problem()
        if stuck is not None:  # a run stopped without its thread while the store says "running"
            return stuck
        if self._thread is None or self._stop.is_set():
            return None
        if not self._thread.is_alive():
            return f"the tick thread stopped: {self._died or 'no reason recorded'}"
        limit = max(STALE_AFTER, STALE_TICKS * timedelta(seconds=self._interval))
        waited = self._clock() - self._last_tick
        if waited <= limit:
            return None
        last_error = self._failing.get("tick")
        why = f" (last error: {last_error})" if last_error else " (a tick may be stuck)"
        return f"no tick has completed for {format_duration(waited)}, more than {format_duration(limit)}{why}"

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
