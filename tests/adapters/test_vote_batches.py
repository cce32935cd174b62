"""Replies are prepared one by one and those prepared meanwhile cast together; a slow check holds up only its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import pytest

from adapters.channel import Answer, AnswerKind, Identity, Reply
from adapters.commands import parse_command
from adapters.vote_batches import VoteBatches, one_by_one


def reply(n: int) -> Reply:
    return Reply(Identity("slack", f"U{n}"), parse_command(f"approve demo-{n}"), review_id=f"demo-{n}")


def counted(r: Reply) -> Answer:
    return Answer(AnswerKind.COUNTED, f"counted {r.voter.id}", r.review_id)


class Gate:
    """A handler whose first ``held`` batches wait until released; records every batch's voters."""

    def __init__(self, held: int = 1) -> None:
        self.batches: list[list[str]] = []
        self.threads: set[int] = set()
        self.started = threading.Semaphore(0)
        self.release = threading.Event()
        self._held = held
        self._lock = threading.Lock()

    def __call__(self, replies: Sequence[Reply]) -> list[Answer | Exception]:
        with self._lock:
            self.batches.append([r.voter.id for r in replies])
            self.threads.add(threading.get_ident())
            hold = len(self.batches) <= self._held
        self.started.release()
        if hold:
            assert self.release.wait(10)
        return [counted(r) for r in replies]


async def started(gate: Gate, times: int = 1) -> None:
    for _ in range(times):
        assert await asyncio.to_thread(gate.started.acquire, True, 10)


async def test_a_lone_reply_goes_at_once_and_those_that_come_meanwhile_go_together() -> None:
    gate = Gate()
    batches = VoteBatches(gate, stall=0.01)
    first = asyncio.ensure_future(batches.vote(reply(0)))
    await started(gate)
    rest = [asyncio.ensure_future(batches.vote(reply(n))) for n in range(1, 6)]
    await asyncio.sleep(0)
    gate.release.set()
    answers = await asyncio.gather(first, *rest)
    assert gate.batches == [["U0"], ["U1", "U2", "U3", "U4", "U5"]]
    assert len(gate.threads) == 1  # a cast under way starts no second worker: more threads only cost CPU
    assert [a.text for a in answers] == [f"counted U{n}" for n in range(6)]  # each reply gets its own answer


class SlowCheck:
    """Stages whose check of ``slow`` waits until released; every other reply is a ballot at once."""

    def __init__(self, slow: str) -> None:
        self.slow = slow
        self.checking = threading.Event()
        self.release = threading.Event()
        self.casts: list[list[str]] = []

    def preparer(self, upcoming: Sequence[Reply]) -> Callable[[Reply], Answer | Exception | Reply]:
        def prepare(r: Reply) -> Reply:
            if r.voter.id == self.slow:
                self.checking.set()
                assert self.release.wait(10)
            return r

        return prepare

    def cast(self, ballots: Sequence[Reply]) -> list[Answer | Exception]:
        self.casts.append([r.voter.id for r in ballots])
        return [counted(r) for r in ballots]


async def test_a_slow_check_holds_up_its_own_reply_only() -> None:
    check = SlowCheck(slow="U0")
    batches = VoteBatches(check, workers=2, stall=0.01)
    slow = asyncio.ensure_future(batches.vote(reply(0)))
    assert await asyncio.to_thread(check.checking.wait, 10)
    quick = await asyncio.wait_for(asyncio.gather(*(batches.vote(reply(n)) for n in (1, 2))), 10)
    assert [a.text for a in quick] == ["counted U1", "counted U2"] and not slow.done()  # a second worker took them
    check.release.set()
    assert (await asyncio.wait_for(slow, 10)).text == "counted U0"
    assert check.casts[-1] == ["U0"] and sorted(v for cast in check.casts for v in cast) == ["U0", "U1", "U2"]


class HeldCast:
    """Stages whose first cast waits until released; records what each batch's preparer was told was waiting."""

    def __init__(self) -> None:
        self.upcoming: list[list[str]] = []
        self.casting = threading.Event()
        self.release = threading.Event()

    def preparer(self, upcoming: Sequence[Reply]) -> Callable[[Reply], Reply]:
        self.upcoming.append([r.voter.id for r in upcoming])
        return lambda r: r

    def cast(self, ballots: Sequence[Reply]) -> list[Answer | Exception]:
        if len(self.upcoming) == 1:
            self.casting.set()
            assert self.release.wait(10)
        return [counted(r) for r in ballots]


async def test_each_batch_is_prepared_knowing_the_replies_waiting_when_it_begins() -> None:
    stages = HeldCast()
    batches = VoteBatches(stages, workers=1)
    first = asyncio.ensure_future(batches.vote(reply(0)))
    assert await asyncio.to_thread(stages.casting.wait, 10)
    waiting = [asyncio.ensure_future(batches.vote(reply(n))) for n in (1, 2, 3)]
    await asyncio.sleep(0)
    stages.release.set()
    assert [a.text for a in await asyncio.gather(first, *waiting)] == [f"counted U{n}" for n in range(4)]
    assert stages.upcoming == [["U0"], ["U1", "U2", "U3"]]  # the second preparer may read for all three at once


async def test_with_every_worker_stuck_in_a_check_the_others_wait_for_one_to_come_free() -> None:
    check = SlowCheck(slow="U0")
    batches = VoteBatches(check, workers=1, stall=0.01)
    slow = asyncio.ensure_future(batches.vote(reply(0)))
    assert await asyncio.to_thread(check.checking.wait, 10)
    waiting = asyncio.ensure_future(batches.vote(reply(1)))
    done, _ = await asyncio.wait({waiting}, timeout=0.1)  # several looks of the watch: no worker to add
    assert not done
    check.release.set()
    assert [a.text for a in await asyncio.gather(slow, waiting)] == ["counted U0", "counted U1"]


async def test_an_exception_fails_its_own_reply_only() -> None:
    def handle_many(replies: Sequence[Reply]) -> list[Answer | Exception]:
        return [OSError("disk full") if r.voter.id == "U1" else counted(r) for r in replies]

    batches = VoteBatches(handle_many)
    results = await asyncio.gather(*(batches.vote(reply(n)) for n in range(3)), return_exceptions=True)
    assert isinstance(results[1], OSError) and str(results[1]) == "disk full"
    assert [r.text for r in results if isinstance(r, Answer)] == ["counted U0", "counted U2"]


async def test_a_handler_that_raises_or_miscounts_fails_its_batch_and_the_next_batch_still_runs() -> None:
    calls: list[int] = []

    def handle_many(replies: Sequence[Reply]) -> list[Answer | Exception]:
        calls.append(len(replies))
        if len(calls) == 1:
            raise RuntimeError("store gone")
        if len(calls) == 2:
            return []
        return [counted(r) for r in replies]

    batches = VoteBatches(handle_many)
    with pytest.raises(RuntimeError, match="store gone"):
        await batches.vote(reply(0))
    with pytest.raises(RuntimeError, match="gave 0 answers to 1 replies"):
        await batches.vote(reply(1))
    assert (await batches.vote(reply(2))).text == "counted U2"


async def test_a_sender_that_went_away_does_not_break_the_batch() -> None:
    gate = Gate()
    batches = VoteBatches(gate)
    gone = asyncio.ensure_future(batches.vote(reply(0)))
    await started(gate)
    gone.cancel()
    stays = asyncio.ensure_future(batches.vote(reply(1)))
    await asyncio.sleep(0)
    gate.release.set()
    assert (await stays).text == "counted U1"
    assert gone.cancelled()


def test_one_by_one_calls_a_single_handler_per_reply_and_keeps_its_errors() -> None:
    def handler(r: Reply) -> Answer:
        if r.voter.id == "U1":
            raise ValueError("no")
        return counted(r)

    answers = one_by_one(handler)([reply(0), reply(1), reply(2)])
    assert [type(a).__name__ for a in answers] == ["Answer", "ValueError", "Answer"]


def test_workers_and_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        VoteBatches(one_by_one(counted), workers=0)
