"""An answer queue that accepts deliveries and never casts them: the process a kill -9 interrupts.

``python -m tests.bot.desk.answer_queue_child STATE N`` accepts N GitHub votes
on review demo-1 (delivery keys ``hook:d-<n>``) through ``AnswerQueue.accept``
- what the webhook route calls before it answers 200, and the poller before
it moves its cursor - prints "accepted" and waits for its SIGKILL with every
cast blocked.

With ``--die-in-commit`` delivery 0 is committed alone while deliveries
1..N-1 wait for it (``test_answer_queue.accept_behind_a_commit``); the process
kills itself with SIGKILL inside their shared commit, after its first row. It
prints each key ``accept`` acknowledged, as it returns.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from datetime import UTC, datetime
from collections.abc import Sequence
from pathlib import Path

from adapters.channel import Answer, Identity, Reply
from adapters.commands import parse_command
from bot.desk.answer_queue import AnswerQueue
from bot.store import SqliteStore


def vote(n: int) -> Reply:
    voter = Identity("github", f"user{n}", f"user{n}")
    return Reply(voter, parse_command("approve demo-1"), dedupe_key=f"github:comment:{n}", via="github comment",
                 respond={"repository": "octo/ops", "comment_id": n})


class HeldClock:
    """A store's clock that, once ``armed``, holds its first call until ``release`` (the commit in flight) and
    fails its call number ``fail_at`` (a row of a later commit): raising, or killing the process with SIGKILL."""

    def __init__(self, fail_at: int | None = None, *, kill: bool = False) -> None:
        self.armed = False
        self.calls = 0
        self.entered, self.release = threading.Event(), threading.Event()
        self._fail_at, self._kill = fail_at, kill

    def __call__(self) -> datetime:
        if self.armed:
            self.calls += 1
            if self.calls == 1:
                self.entered.set()
                assert self.release.wait(15), "the test never released the first commit"
            if self.calls == self._fail_at:
                if self._kill:
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError("the store failed in the middle of a commit")
        return datetime.now(UTC)


def die_in_commit(state: str, count: int) -> None:
    from tests.bot.desk.test_answer_queue import accept_behind_a_commit

    clock = HeldClock(fail_at=3, kill=True)
    store = SqliteStore(Path(state), clock=clock)
    clock.armed = True

    class Printing(AnswerQueue):
        def accept(self, key: str, replies: list[Reply]) -> bool:
            new = super().accept(key, replies)
            print(key, flush=True)
            return new

    accept_behind_a_commit(Printing(store, lambda replies: [], lambda keys, answered: None), clock, count)


def main(state: str, count: int) -> None:
    never = threading.Event()

    def cast(replies: Sequence[Reply]) -> list[Answer | Exception]:
        never.wait()
        return []

    answers = AnswerQueue(SqliteStore(Path(state)), cast, lambda keys, answered: None)
    answers.start()
    for n in range(count):
        assert answers.accept(f"hook:d-{n}", [vote(n)])
    print("accepted", flush=True)
    never.wait()


if __name__ == "__main__":
    (die_in_commit if "--die-in-commit" in sys.argv else main)(sys.argv[1], int(sys.argv[2]))
