"""How do many answers arriving at once reach a sync vote handler? Prepared one by one, cast together.

An async adapter (Slack's Bolt app) cannot call the bot's handler on its
event loop: casting a vote reads and fsyncs a file. ``VoteBatches`` runs
the handler on a few pool threads (``workers``) in two stages:

* **prepare**, one reply at a time: which review, and may this voter
  answer it (a batch's preparer is told the replies waiting when it
  begins, so it can read their reviews in one go). A check may ask an API (a Slack user group, a channel's
  members): when every worker has been inside one reply's check for
  ``stall`` seconds and others wait, one more worker starts (up to
  ``workers``), so a slow check holds up its own reply, not the others'.
* **cast**, everything prepared meanwhile in one call (one store
  transaction, one commit), one cast at a time: the store serialises its
  writers anyway, so a second cast in flight would only split the votes
  waiting into two commits.

So under load the bot writes once for all the votes it got while the last
write ran, and when idle a lone reply goes at once (a batch of one, no
waiting). Answers go back to each reply's event loop in one call per batch.
One worker is the rule: each more thread wanting the GIL at once costs
every vote CPU in switches (measured: 3 workers always on gave 0.6x the
acks/s of one, at 1.4x the CPU per ack).

A handler with nothing to prepare is a plain ``VotesHandler`` (many replies
in, one answer each): its batches are the replies that arrived while the
previous one was handled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from .channel import Answer, Reply, VoteHandler

__all__ = ["VoteBatches", "VoteStages", "VotesHandler", "one_by_one"]

#: Many replies at once -> one answer each, in order; an exception in place of an answer fails that reply only.
VotesHandler = Callable[[Sequence[Reply]], list[Answer | Exception]]

B = TypeVar("B")


@runtime_checkable
class VoteStages(Protocol[B]):
    """A vote handler in two stages: ``preparer()`` for the replies of one batch, then ``cast`` of their ballots.

    A preparer turns one reply into the answer it gets at once (help, a
    refusal, an exception) or a ballot to cast; it serves the replies of one
    batch, so it may keep what it read for them (a review asked about by many).
    ``upcoming`` are the replies waiting when the batch begins (more may
    follow): it may read for all of them at once.
    ``cast`` gives one answer per ballot, in order, or an exception in its place.
    """

    def preparer(self, upcoming: Sequence[Reply]) -> Callable[[Reply], Answer | Exception | B]: ...

    def cast(self, ballots: Sequence[B]) -> list[Answer | Exception]: ...


def one_by_one(handler: VoteHandler) -> VotesHandler:
    """A ``VotesHandler`` that calls ``handler`` for each reply in turn."""

    def handle_many(replies: Sequence[Reply]) -> list[Answer | Exception]:
        answers: list[Answer | Exception] = []
        for reply in replies:
            try:
                answers.append(handler(reply))
            except Exception as err:  # noqa: BLE001 - handed to that reply's sender, not swallowed
                answers.append(err)
        return answers

    return handle_many


class _Unprepared:
    """A ``VotesHandler`` as stages: every reply is its own ballot."""

    def __init__(self, handle_many: VotesHandler) -> None:
        self.cast = handle_many

    def preparer(self, upcoming: Sequence[Reply]) -> Callable[[Reply], Reply]:
        return _itself


def _itself(reply: Reply) -> Reply:
    return reply


_Waiting = tuple[Any, "asyncio.Future[Answer]"]  # a reply or a ballot, and the future its sender awaits


class VoteBatches(Generic[B]):
    """``await batches.vote(reply)`` -> its ``Answer``; replies prepared meanwhile are cast together."""

    def __init__(self, handler: VoteStages[B] | VotesHandler, *, workers: int = 4, most: int = 500,
                 stall: float = 0.1, clock: Callable[[], float] = time.monotonic) -> None:
        if workers < 1 or most < 1:
            raise ValueError("workers and most must be at least 1")
        self._stall = stall
        self._clock = clock
        self._stages: VoteStages[Any] = handler if isinstance(handler, VoteStages) else _Unprepared(handler)
        self._workers = workers
        self._most = most
        self._lock = threading.Lock()
        self._to_prepare: deque[_Waiting] = deque()
        self._to_cast: list[_Waiting] = []
        self._running = 0  # workers started and not yet finished
        self._casting = False
        self._preparing: dict[int, float] = {}  # worker -> since when it prepares its current reply
        self._ids = itertools.count()
        self._watching = False  # a look at stalled workers is due on some loop

    async def vote(self, reply: Reply) -> Answer:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Answer] = loop.create_future()
        with self._lock:
            self._to_prepare.append((reply, future))
            start = self._running == 0
            self._running += start
            watch = not start and not self._watching
            self._watching |= watch
        if start:
            self._start(loop)
        elif watch:
            loop.call_later(self._stall, self._watch, loop)
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run one more worker (already counted in ``_running``)."""
        try:
            loop.run_in_executor(None, self._work)
        except BaseException:  # no pool to run on (a loop shutting down): the worker never ran
            with self._lock:
                self._running -= 1
            raise

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """While replies wait: one more worker when every worker is stuck in one reply's check."""
        now = self._clock()
        with self._lock:
            stuck = sum(now - since >= self._stall for since in self._preparing.values())
            start = bool(self._to_prepare) and stuck == self._running and self._running < self._workers
            self._running += start
            self._watching = bool(self._to_prepare)
        if start:
            self._start(loop)
        if self._watching:
            loop.call_later(self._stall, self._watch, loop)

    def _work(self) -> None:
        """One worker: cast what is prepared when nobody is casting and nothing waits to be prepared
        (or a full batch does), else prepare the next reply; done when there is neither."""
        prepare: Callable[[Reply], Any] | None = None
        upcoming: list[Reply] = []
        me = next(self._ids)
        while True:
            with self._lock:
                cast = None
                if self._to_cast and not self._casting and (not self._to_prepare or len(self._to_cast) >= self._most):
                    self._casting = True
                    cast, self._to_cast = self._to_cast[: self._most], self._to_cast[self._most :]
                elif self._to_prepare:
                    if prepare is None:  # a new batch: the replies waiting now are its first
                        upcoming = [waiting for waiting, _ in self._to_prepare]
                    reply, future = self._to_prepare.popleft()
                    self._preparing[me] = self._clock()
                else:
                    self._running -= 1
                    return
            if cast is not None:
                try:
                    self._cast(cast)
                finally:
                    with self._lock:
                        self._casting = False
                prepare = None  # the next batch reads afresh what this one wrote
                continue
            if prepare is None:
                prepare = self._stages.preparer(upcoming)
            try:
                ballot = prepare(reply)
            except Exception as err:  # noqa: BLE001 - that reply's answer: its sender is told
                ballot = err
            with self._lock:
                del self._preparing[me]
                if not isinstance(ballot, (Answer, Exception)):
                    self._to_cast.append((ballot, future))
            if isinstance(ballot, (Answer, Exception)):
                _settle([(future, ballot)])

    def _cast(self, batch: list[_Waiting]) -> None:
        try:
            answers: Sequence[Answer | BaseException] = self._stages.cast([ballot for ballot, _ in batch])
        except Exception as err:  # noqa: BLE001 - the batch's answer: every sender in it is told
            answers = [err] * len(batch)
        if len(answers) != len(batch):
            wrong = RuntimeError(f"the vote handler gave {len(answers)} answers to {len(batch)} replies")
            answers = [wrong] * len(batch)
        _settle([(future, answer) for (_, future), answer in zip(batch, answers, strict=True)])


def _settle(results: list[tuple[asyncio.Future[Answer], Answer | BaseException]]) -> None:
    """Hand each answer to its future, on the future's own loop: one call per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Answer], Answer | BaseException]]] = {}
    for future, answer in results:
        by_loop.setdefault(future.get_loop(), []).append((future, answer))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody awaits these answers any more
            loop.call_soon_threadsafe(_resolve, settled)


def _resolve(settled: list[tuple[asyncio.Future[Answer], Answer | BaseException]]) -> None:
    for future, answer in settled:
        if future.done():  # its sender went away (a cancelled request)
            continue
        if isinstance(answer, Answer):
            future.set_result(answer)
        else:
            future.set_exception(answer)
