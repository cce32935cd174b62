"""The serve loop's heartbeat: what the bot does every ``poll_interval`` seconds.

One tick (1) starts the runs the CLI asked for through the store's inbox,
(2) resumes runs whose review was decided (by ``loopbot decide`` in another
process, or a deadline), and (3) fires review deadlines: reminders,
escalations and default decisions. Everything it learns comes from the store,
so a decision made while the bot was down is picked up by the first tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.reviews import Review, decide_by_timeout, due_actions
from bot.runner import Runner, utcnow
from bot.store.base import Store, StoreError

__all__ = ["Service", "RUN_REQUEST"]

log = logging.getLogger(__name__)

#: The inbox request kind that asks the server to start a run: payload {"loop", "trigger"}.
RUN_REQUEST = "run"


class Service:
    """Runs ticks on a thread until stopped; ``tick()`` is also callable directly (tests)."""

    def __init__(self, store: Store, runner: Runner, *, clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._runner = runner
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one tick ------------------------------------------------------------------

    def tick(self) -> None:
        self.take_requests()
        for review in self._store.list_reviews():
            if review.status == "decided":
                self._runner.apply_decided(review.id)
            elif review.status == "open":
                self.fire_deadlines(review)

    def take_requests(self) -> None:
        """Start the runs asked for; a request is acknowledged only once handled (at-least-once)."""
        for request in self._store.take_requests():
            if request.kind == RUN_REQUEST:
                self._start_requested(request.id, request.payload)
            else:
                log.error("request %s has unknown kind %r; dropped", request.id, request.kind)
            self._store.finish_request(request.id)

    def _start_requested(self, request_id: str, payload: dict[str, Any]) -> None:
        """Idempotent by request id: the run's trigger names the request, so a redelivery finds it."""
        loop = str(payload.get("loop", ""))
        trigger = f"{payload.get('trigger', 'cli')} ({request_id})"
        if any(run.trigger == trigger for run in self._store.list_runs()):
            return  # handled before a crash, not yet finished
        log.info("request %s: run loop %s", request_id, loop)
        try:
            self._runner.request_run(loop, trigger=trigger)
        except LookupError as err:  # the loop left the config since the request was made
            log.error("request %s refused: %s", request_id, err)

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
                    self._runner.apply_decided(review.id)
                else:
                    self._runner.remind(decided, outcome.feedback)

    # -- the thread ----------------------------------------------------------------

    def _loop(self, interval: float) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except (OSError, StoreError) as err:  # state dir gone, disk full, a corrupt document: /healthz says 503
                log.error("tick failed, retrying in %.1fs: %s", interval, err)
            self._stop.wait(interval)

    def start(self, interval: float) -> None:
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="loopbot-tick", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
