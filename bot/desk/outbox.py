"""Every message a channel must make is a durable task, delivered off the tick and retried until it lands.

A post, an update, an escalation or an answer to a voter is first written to
the store as an ``OutboxTask`` (so a crash or an outage loses nothing), then
delivered by the delivery thread of its channel: one per channel, so a slow or
dead Slack never delays GitHub, the tick, a vote's acknowledgement or a run.
A failed attempt is retried with exponential backoff (or after the
``Retry-After`` the channel reported), logged and shown in ``status`` with
its error; nothing is dropped silently. Delivery is at least once, and the
channel contract makes a repeated post find its first message instead of
posting twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from adapters.channel import Answer, AnswerKind, Channel, ChannelError, MessageRef, ReviewPost, Target
from adapters.waits import MAX_WAIT, clamp_wait

from bot.review_records import Review
from bot.store.base import OutboxTask, Store, StoreError, UnknownReviewError

__all__ = ["Outbox", "DeliveryThread", "backoff", "ESCALATION_PREFIX", "MAX_BACKOFF", "IDLE_POLL"]

log = logging.getLogger(__name__)

#: The longest wait between two attempts of a task that keeps failing.
MAX_BACKOFF = timedelta(seconds=MAX_WAIT)
#: How often an idle delivery thread looks for tasks another process added (its own are signalled at once).
IDLE_POLL = 1.0
#: Refs of escalation messages carry this before their target key, apart from the review's own posts.
ESCALATION_PREFIX = "escalation:"
#: A task waiting for another (an update before its post landed) looks again this soon, without counting a failure.
_NOT_YET = timedelta(seconds=1)
#: The longest a channel's deliveries are held in a row for its intake (``Outbox.yield_to``); then a round goes.
MAX_HOLD = 2.0


def backoff(attempts: int, retry_after: float | None = None) -> timedelta:
    """Wait before attempt ``attempts + 1``: what the channel asked for, else 1 s, 2 s, 4 s ... capped.

    The channel's ask is clamped before it becomes a ``timedelta`` (any
    channel may pass on an upstream's ``inf`` or ``nan``); NaN counts as no ask.
    """
    asked = clamp_wait(retry_after)
    if asked is not None:
        return timedelta(seconds=asked)
    exponent = min(max(0, attempts - 1), 20)  # 2**20 s is past the cap already; larger would overflow
    return min(timedelta(seconds=2**exponent), MAX_BACKOFF)


class _Later(Exception):
    """The task cannot run yet (its post has not landed); try again soon without counting a failure."""


class Outbox:
    """Adds tasks to the store and delivers the due ones of a channel (see ``DeliveryThread``)."""

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        post_for: Callable[[Review], ReviewPost],
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._channels = dict(channels)
        self._post_for = post_for
        self._clock = clock
        self._wakeups: dict[str, threading.Event] = {name: threading.Event() for name in self._channels}
        self._intakes: dict[str, Callable[[], float]] = {}
        self._held_since: dict[str, float] = {}

    @property
    def channels(self) -> list[str]:
        return list(self._channels)

    def wakeup(self, channel: str) -> threading.Event:
        return self._wakeups[channel]

    def add(self, task: OutboxTask) -> bool:
        """Store ``task`` (once per id) and wake its delivery thread."""
        if task.channel not in self._channels:
            log.warning("no %s channel is configured: %s of review %s stays undelivered", task.channel,
                        task.action, task.review_id)
        added = self._store.add_task(task)
        self.wake(task.channel)
        return added

    def yield_to(self, channel: str, busy: Callable[[], float]) -> None:
        """Hold ``channel``'s deliveries while ``busy()`` (seconds until its intake is quiet) is above 0.

        A burst of webhook deliveries then has the interpreter and the store's writer to itself, and the
        answers catch up after it; held ``MAX_HOLD`` s in a row, a round is delivered anyway.
        """
        self._intakes[channel] = busy

    def held(self, channel: str) -> float:
        """Seconds ``channel``'s delivery thread waits before its next round (0: deliver now)."""
        busy = self._intakes.get(channel)
        wait = busy() if busy is not None else 0.0
        now = time.monotonic()
        since = self._held_since.setdefault(channel, now)
        if wait <= 0 or now - since >= MAX_HOLD:
            del self._held_since[channel]
            return 0.0
        return min(wait, MAX_HOLD - (now - since))

    def wake(self, channel: str) -> None:
        """Tasks of ``channel`` were stored: its worker looks for them now."""
        event = self._wakeups.get(channel)
        if event is not None:
            event.set()

    # -- delivery ------------------------------------------------------------------

    def deliver_due(self, channel: str, *, limit: int = 50) -> int:
        """Attempt every due task of ``channel`` once; how many were delivered.

        The delivered tasks are finished together, in one write after the round (not one fsync each, which
        held the store's writer from the webhook's deliveries). A crash before that write delivers the round's
        tasks again: at least once, as always - GitHub finds its reply by its marker and keeps one reaction of
        each kind, a Slack answer (ephemeral) may be shown twice. None is lost, and no task applies a decision.
        """
        delivered: list[str] = []
        try:
            for task in self._store.due_tasks(channel, self._clock(), limit=limit):
                try:
                    if self.attempt(task):
                        delivered.append(task.id)
                except (StoreError, OSError):
                    raise  # the store itself: the delivery thread waits and reads its tasks again
                except Exception:  # a bug in the bookkeeping of one task must not stop the tasks after it
                    log.exception("outbox task %s of the %s channel could not be attempted; it is set aside for %s",
                                  task.id, channel, MAX_BACKOFF)
                    self._set_aside(task)
        finally:
            if delivered:
                self._store.finish_tasks(delivered)
        return len(delivered)

    def _set_aside(self, task: OutboxTask) -> None:
        """Put off a task whose attempt crashed, so it does not crash again at once (it is not dropped)."""
        def later(stored: OutboxTask) -> OutboxTask:
            stored.not_before = self._clock() + MAX_BACKOFF
            return stored

        try:
            self._store.update_task(task.id, later)
        except Exception:
            log.exception("outbox task %s could not be set aside", task.id)

    def next_wait(self, channel: str) -> float:
        """Seconds until ``channel``'s next task is due, at most ``IDLE_POLL``."""
        due = self._store.next_task_at(channel)
        if due is None:
            return IDLE_POLL
        return max(0.0, min(IDLE_POLL, (due - self._clock()).total_seconds()))

    def attempt(self, task: OutboxTask) -> bool:
        """One try at ``task``: True on success (the caller finishes it), rescheduled (and logged) on failure."""
        channel = self._channels.get(task.channel)
        try:
            if channel is None:
                raise ChannelError(f"the {task.channel} channel is not configured in this bot")
            self._run(channel, task)
        except _Later:
            self._store.update_task(task.id, lambda t: setattr(t, "not_before", self._clock() + _NOT_YET))
            return False
        except UnknownReviewError as err:
            log.error("outbox task %s dropped: %s", task.id, err)
            self._store.finish_tasks([task.id])
            return False
        except ChannelError as err:
            self._failed(task, err)
            return False
        except Exception as err:  # a channel's bug must not kill its thread: the task waits, with the traceback logged
            log.exception("outbox task %s crashed in the %s channel", task.id, task.channel)
            self._failed(task, ChannelError(f"internal error: {type(err).__name__}: {err}"))
            return False
        if task.attempts:
            log.info("%s of review %s to %s delivered after %d failed attempt(s)", task.action, task.review_id,
                     task.channel, task.attempts)
        return True

    def _failed(self, task: OutboxTask, err: ChannelError) -> None:
        def reschedule(stored: OutboxTask) -> OutboxTask:
            stored.attempts += 1
            stored.last_error = str(err)
            stored.not_before = self._clock() + backoff(stored.attempts, err.retry_after)
            return stored

        stored = self._store.update_task(task.id, reschedule)
        permanent = " (the channel says retrying cannot help until this is fixed)" if err.permanent else ""
        log.warning(
            "could not deliver %s of review %s to %s (attempt %d): %s%s; retrying at %s",
            task.action, task.review_id, task.channel, stored.attempts, err, permanent,
            stored.not_before.isoformat(timespec="seconds") if stored.not_before else "once due",
        )

    def _run(self, channel: Channel, task: OutboxTask) -> None:
        payload = task.payload
        if task.action == "answer":
            answer = payload.get("answer") or {}
            channel.answer(payload.get("respond") or {}, Answer(AnswerKind(answer.get("kind", "info")),
                                                                str(answer.get("text", "")), task.review_id))
            return
        if task.review_id is None:
            raise ChannelError(f"outbox task {task.id} names no review")
        review = self._store.get_review(task.review_id)
        post = self._post_for(review)
        if task.action == "post":
            target = Target.from_dict(payload["target"])
            self._keep(review.id, channel.post_request(target, post), target.key)
        elif task.action == "escalate":
            target = Target.from_dict(payload["target"])
            ref = channel.post_escalation(target, post, str(payload.get("text", "")))
            self._keep(review.id, ref, ESCALATION_PREFIX + target.key)
        elif task.action == "update":
            posted = _ref_for(review, str(payload["target"]))
            if posted is None:
                raise _Later()
            channel.post_update(posted, post, str(payload.get("text", "")))
        else:
            raise ChannelError(f"unknown outbox action {task.action!r}")

    def _keep(self, review_id: str, ref: MessageRef, key: str) -> None:
        """Record where the message went, before the task is finished (a crash between re-finds it)."""
        data = replace(ref, target=key).to_dict()

        def record(review: Review) -> None:
            review.posts = [p for p in review.posts if (p.get("target") or p.get("channel")) != key] + [data]

        self._store.update_review(review_id, record)


def _ref_for(review: Review, key: str) -> MessageRef | None:
    for raw in review.posts:
        if (raw.get("target") or raw.get("channel")) == key:
            return MessageRef.from_dict(raw)
    return None


class DeliveryThread:
    """One channel's delivery thread: due tasks, then a wait until the next is due or a new one arrives."""

    def __init__(self, outbox: Outbox, channel: str) -> None:
        self._outbox = outbox
        self._channel = channel
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"outbox:{channel}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        wake = self._outbox.wakeup(self._channel)
        while not self._stop.is_set():
            wake.clear()
            held = self._outbox.held(self._channel)
            if held > 0:
                self._stop.wait(held)
                continue
            try:
                self._outbox.deliver_due(self._channel)
                wait = self._outbox.next_wait(self._channel)
            except (StoreError, OSError) as err:  # the store is unusable for now: say so, try again later
                log.error("outbox of %s cannot read its tasks: %s", self._channel, err)
                wait = IDLE_POLL
            except Exception:  # anything else is a bug: logged with its traceback, and the channel keeps posting
                log.exception("outbox of %s failed; it goes on in %.0f s", self._channel, IDLE_POLL)
                wait = IDLE_POLL
            wake.wait(wait)

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self._outbox.wakeup(self._channel).set()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
