"""Webhook votes, queued: answered at once, cast by one worker - and never lost in between.

A webhook's request records its delivery together with its votes in one
durable write (``Store.record_delivery(key, work)``) and is answered; this
worker casts the votes through the vote path, has each voter answered
through the outbox, and only then marks the delivery finished. GitHub waits
at most 10 s and may send bursts the vote path alone would not keep up
with, so the worker mostly waits while deliveries keep arriving (QUIET,
MAX_WAIT, BUSY_SHARE). A crash between the answer and the vote loses
nothing: at the next start every unfinished delivery is cast again (a vote
already counted is recognised by its dedupe key and answered as a
duplicate, once).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from adapters.channel import Reply

from bot.store.base import Store

__all__ = ["IntakeQueue"]

log = logging.getLogger(__name__)

#: Seconds before a vote that failed to be cast (the store was unreachable) is tried again; doubles up to the cap.
RETRY_FIRST, RETRY_CAP = 1.0, 60.0
#: The worker casts freely once no delivery has arrived for QUIET seconds. While deliveries keep arriving it
#: waits - a burst is accepted first (GitHub gives up on a delivery after 10 s and never retries it) - except
#: for votes queued longer than MAX_WAIT, which it casts taking at most BUSY_SHARE of the time, so a steady
#: stream still has its votes cast and the webhook keeps the rest.
QUIET, MAX_WAIT, BUSY_SHARE = 0.05, 5.0, 0.2

_Item = tuple[str, list[dict[str, Any]], float]  # key, work, when it was accepted (monotonic)


class IntakeQueue:
    """``accept(key, replies)`` for the webhook route; ``start``/``stop`` for the worker that casts them."""

    def __init__(self, store: Store, cast: Callable[[Reply], None]) -> None:
        self._store = store
        self._cast = cast
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._draining = threading.Event()  # stop: cast what is queued at once, quiet or not
        self._last_accept = float("-inf")
        self._next_busy_cast = float("-inf")  # while busy, the worker's next cast waits until then
        self._thread: threading.Thread | None = None

    def accept(self, key: str, replies: list[Reply]) -> bool:
        """Record the delivery with its votes durably; False (and nothing queued) when ``key`` came before."""
        work = [reply.to_dict() for reply in replies]
        if not self._store.record_delivery(key, work):
            return False
        self._last_accept = now = time.monotonic()
        self._queue.put((key, work, now))
        return True

    def start(self) -> None:
        """Queue what an earlier process accepted but did not finish, then cast in the background."""
        left = self._store.pending_deliveries()
        if left:
            log.info("github: %d webhook delivery(ies) accepted before the restart wait to be cast; casting now",
                     len(left))
        for key, work in left:
            self._queue.put((key, work, float("-inf")))
        self._thread = threading.Thread(target=self._work, name="webhook-intake", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Cast what is queued for up to ``timeout`` s; what is left stays recorded for the next start."""
        self._queue.put(None)
        self._draining.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("github: stopped with webhook votes still queued; the next start casts them")
        self._stopping.set()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            key, work, accepted = item
            self._wait_for_quiet(accepted)
            started = time.monotonic()
            wait = RETRY_FIRST
            while not self._cast_all(key, work):
                if self._stopping.wait(wait):
                    return  # still recorded as pending: the next start casts it
                wait = min(RETRY_CAP, wait * 2)
            ended = time.monotonic()
            self._next_busy_cast = ended + (ended - started) * (1 - BUSY_SHARE) / BUSY_SHARE

    def _wait_for_quiet(self, accepted: float) -> None:
        """Let the webhook have the process while deliveries keep arriving (see QUIET, MAX_WAIT, BUSY_SHARE)."""
        while not self._draining.is_set():
            now = time.monotonic()
            quiet_in = QUIET - (now - self._last_accept)
            if quiet_in <= 0:
                return
            overdue_in = max(MAX_WAIT - (now - accepted), self._next_busy_cast - now)
            if overdue_in <= 0:
                return
            self._draining.wait(min(quiet_in, overdue_in))

    def _cast_all(self, key: str, work: list[dict[str, Any]]) -> bool:
        """Cast every vote of one delivery and mark it finished; False when the store failed (try again)."""
        try:
            for raw in work:
                try:
                    reply = Reply.from_dict(raw)
                except ValueError as err:  # never cast, never castable: say so, do not retry forever
                    log.error("github: delivery %s holds a damaged vote, skipped: %s", key, err)
                    continue
                self._cast(reply)
            self._store.finish_delivery(key)
        except Exception:  # the worker's boundary: the delivery stays pending and is tried again
            log.exception("github: could not cast the votes of delivery %s; trying again", key)
            return False
        return True
