"""Votes from the channels that answer later (GitHub's webhook and polling): recorded first, cast in batches.

``accept_many(deliveries)`` (the webhook's batches) and ``accept(key,
replies)`` (the poller's one) record deliveries together with their votes in
one durable write (``Store.record_deliveries``) and return: the
webhook answers GitHub (which waits at most 10 s), the poller moves its
cursor. The caster thread then takes every delivery waiting, casts all
their votes through the vote path's entrance in one ``handle_many`` (one
read and one write per review for the batch), and in one more write
queues each voter's answer in the outbox and marks the deliveries finished
(``ReviewDesk.finish_deliveries``). Under a burst the batches grow, so
casting keeps up with accepting without waiting for the burst to end.

A crash between accept and cast loses nothing: at the next start every
unfinished delivery is cast again (a vote already counted is recognised by
its dedupe key and answered as a duplicate, once). The key is the same for a
comment seen by the webhook and by the poller, so it is cast once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from adapters.channel import Answer, Reply
from adapters.vote_batches import VotesHandler

from bot.store.base import Store

__all__ = ["AnswerQueue"]

log = logging.getLogger(__name__)

#: Seconds before a vote that failed to be cast (the store was unreachable) is tried again; doubles up to the cap.
RETRY_FIRST, RETRY_CAP = 1.0, 60.0
#: The most votes cast in one batch: a batch bounds how long the caster holds the store's write lock.
MOST_PER_BATCH = 500
#: While deliveries stream in, the caster takes a batch at most this often (seconds; see ``_take``).
LINGER = 0.1
#: The intake is busy until this long after its latest delivery (``busy``: the outbox holds its answers meanwhile).
QUIET = 0.25

#: A delivery waiting to be cast: its key and its votes.
_Delivery = tuple[str, list[Reply]]
#: ``finish(keys, answers)``: mark the deliveries done and queue their voters' answers, in one write.
Finish = Callable[[Sequence[str], Sequence[tuple[Reply, Answer]]], None]


class AnswerQueue:
    """``accept_many`` for the webhook route, ``accept`` for the poller; ``start``/``stop`` for the caster thread."""

    def __init__(self, store: Store, votes: VotesHandler, finish: Finish, *, most: int = MOST_PER_BATCH,
                 linger: float = LINGER) -> None:
        self._store = store
        self._votes = votes
        self._finish = finish
        self._most = most
        self._linger = linger
        self._last_take = -linger
        self._last_accept = -QUIET
        self._waiting: queue.SimpleQueue[_Delivery | None] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def busy(self) -> float:
        """Seconds until the intake counts as quiet: ``QUIET`` s after the latest delivery accepted."""
        return self._last_accept + QUIET - time.monotonic()

    def accept(self, key: str, replies: list[Reply]) -> bool:
        """Record one delivery with its votes durably (``accept_many``); False when ``key`` came before."""
        return self.accept_many([(key, replies)])[0]

    def accept_many(self, deliveries: Sequence[_Delivery]) -> list[bool]:
        """Record the deliveries with their votes in one transaction (one fsync); for each, was its key new?

        A redelivery is not queued; a failed commit fails them all and keeps none. The webhook route already
        gathers the deliveries that arrive during a commit into the next call (``adapters.github.webhook``).
        """
        self._last_accept = time.monotonic()
        if not deliveries:
            return []
        new = self._store.record_deliveries([(key, [reply.to_dict() for reply in replies])
                                             for key, replies in deliveries])
        for first, (key, replies) in zip(new, deliveries, strict=True):
            if first:
                self._waiting.put((key, list(replies)))
        return new

    def start(self) -> None:
        """Queue what an earlier process accepted but did not finish, then cast in the background."""
        left = self._store.pending_deliveries()
        if left:
            log.info("github: %d delivery(ies) accepted before the restart wait to be cast; casting now", len(left))
        for key, work in left:
            self._waiting.put((key, _replies(key, work)))
        self._thread = threading.Thread(target=self._cast_waiting, name="github-vote-caster", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Cast what is queued for up to ``timeout`` s; what is left stays recorded for the next start."""
        self._waiting.put(None)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("github: stopped with votes still queued; the next start casts them")
        self._stopping.set()

    def _cast_waiting(self) -> None:
        """Cast batch after batch; a batch the store failed on is tried again, with what arrived meanwhile."""
        failed: list[_Delivery] = []
        wait = RETRY_FIRST
        stop = False
        while True:
            batch, asked = self._take(block=not (failed or stop))
            stop = stop or asked
            failed = self._cast(failed + batch)
            if not failed:
                if stop:
                    return
                wait = RETRY_FIRST
                continue
            if self._stopping.wait(wait):
                return  # still recorded as pending: the next start casts them
            wait = min(RETRY_CAP, wait * 2)

    def _take(self, *, block: bool) -> tuple[list[_Delivery], bool]:
        """Every delivery waiting (up to ``most`` votes), the first one waited for when ``block``; and stop?

        While deliveries stream in, a batch is taken at most every ``linger`` s, the later ones waited for:
        fewer, larger batches cost the intake less of the store's writer and of the interpreter.
        """
        batch: list[_Delivery] = []
        votes = 0
        until = self._last_take + self._linger
        while votes < self._most:
            left = until - time.monotonic()
            try:
                if batch and left > 0:
                    delivery = self._waiting.get(timeout=left)
                else:
                    delivery = self._waiting.get(block=block and not batch)
            except queue.Empty:
                break
            if delivery is None:
                return batch, True
            if not batch and time.monotonic() > until:
                until = 0.0  # the first came after a quiet spell: cast it (and what waits with it) at once
            batch.append(delivery)
            votes += len(delivery[1])
        self._last_take = time.monotonic()
        return batch, False

    def _cast(self, batch: list[_Delivery]) -> list[_Delivery]:
        """Cast every vote of ``batch`` in one call and finish the deliveries; those the store failed on."""
        if not batch:
            return []
        replies = [reply for _key, delivery in batch for reply in delivery]
        try:
            answers = self._votes(replies) if replies else []
        except Exception:  # the caster's boundary: the deliveries stay pending and are tried again
            log.exception("github: could not cast the votes of %d delivery(ies); trying again", len(batch))
            return batch
        failed: list[_Delivery] = []
        finished: list[str] = []
        answered: list[tuple[Reply, Answer]] = []
        at = 0
        for key, delivery in batch:
            mine = answers[at:at + len(delivery)]
            at += len(delivery)
            errors = [answer for answer in mine if isinstance(answer, Exception)]
            if errors:
                log.error("github: the votes of delivery %s could not be cast (%s); trying again", key, errors[0])
                failed.append((key, delivery))
                continue
            finished.append(key)
            answered += [(reply, answer) for reply, answer in zip(delivery, mine, strict=True)
                         if isinstance(answer, Answer)]
        try:
            self._finish(finished, answered)
        except Exception:  # cast, not finished: cast again, each vote then answered as a duplicate of itself
            log.exception("github: %d delivery(ies) were cast but could not be marked finished; trying again",
                          len(finished))
            return batch
        return failed


def _replies(key: str, work: list[dict[str, Any]]) -> list[Reply]:
    """The votes of a delivery as recorded; a damaged one is logged and skipped, never retried forever."""
    replies = []
    for raw in work:
        try:
            replies.append(Reply.from_dict(raw))
        except ValueError as err:
            log.error("github: delivery %s holds a damaged vote, skipped: %s", key, err)
    return replies
