"""How do many answers arriving at once reach a sync vote handler? In batches, one thread hop each.

An async adapter (Slack's Bolt app) cannot call the bot's handler on its
event loop: casting a vote reads and fsyncs a file. Handing every reply to
a pool thread of its own costs a thread hop, a lock convoy in the store
and one durable write per vote. ``VoteBatches`` hands the replies that
arrive while a batch is being handled to the next batch instead, so under
load the bot writes a review once for all the votes it got meanwhile, and
when idle a lone reply goes at once (a batch of one, no waiting). Batches
run on at most ``lanes`` threads, so one slow answer (an API asked about
group membership) does not hold up all the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from .channel import Answer, Reply, VoteHandler

__all__ = ["VoteBatches", "VotesHandler", "one_by_one"]

#: Many replies at once -> one answer each, in order; an exception in place of an answer fails that reply only.
VotesHandler = Callable[[Sequence[Reply]], list[Answer | Exception]]


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


class _Lane:
    """The replies waiting on one event loop and the number of batches it has in flight."""

    def __init__(self) -> None:
        self.waiting: list[tuple[Reply, asyncio.Future[Answer]]] = []
        self.running = 0


class VoteBatches:
    """``await batches.vote(reply)`` -> its ``Answer``; replies that arrive together are handled together."""

    def __init__(self, handle_many: VotesHandler, *, lanes: int = 2, most: int = 500) -> None:
        if lanes < 1 or most < 1:
            raise ValueError("lanes and most must be at least 1")
        self._handle_many = handle_many
        self._lanes = lanes
        self._most = most
        self._loops: dict[asyncio.AbstractEventLoop, _Lane] = {}

    async def vote(self, reply: Reply) -> Answer:
        loop = asyncio.get_running_loop()
        lane = self._loops.get(loop)
        if lane is None:
            self._loops = {known: lane for known, lane in self._loops.items() if not known.is_closed()}
            lane = self._loops[loop] = _Lane()
        future: asyncio.Future[Answer] = loop.create_future()
        lane.waiting.append((reply, future))
        if lane.running < self._lanes:
            self._start(loop, lane)
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop, lane: _Lane) -> None:
        batch, lane.waiting = lane.waiting[: self._most], lane.waiting[self._most :]
        lane.running += 1
        work = loop.run_in_executor(None, self._handle_many, [reply for reply, _ in batch])
        work.add_done_callback(lambda done: self._finish(loop, lane, batch, done))

    def _finish(
        self,
        loop: asyncio.AbstractEventLoop,
        lane: _Lane,
        batch: list[tuple[Reply, asyncio.Future[Answer]]],
        done: asyncio.Future[list[Answer | Exception]],
    ) -> None:
        lane.running -= 1
        error = asyncio.CancelledError() if done.cancelled() else done.exception()
        answers: Sequence[Answer | BaseException] = done.result() if error is None else [error] * len(batch)
        if len(answers) != len(batch):
            wrong = RuntimeError(f"the vote handler gave {len(answers)} answers to {len(batch)} replies")
            answers = [wrong] * len(batch)
        for (_, future), answer in zip(batch, answers, strict=True):
            if future.done():  # its sender went away (a cancelled request)
                continue
            if isinstance(answer, Answer):
                future.set_result(answer)
            else:
                future.set_exception(answer)
        if lane.waiting:
            self._start(loop, lane)
