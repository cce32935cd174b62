"""An answer queue that accepts deliveries and never casts them: the process a kill -9 interrupts.

``python -m tests.bot.desk.answer_queue_child STATE N`` accepts N GitHub votes
on review demo-1 (delivery keys ``hook:d-<n>``) through ``AnswerQueue.accept``
- what the webhook route calls before it answers 200, and the poller before
it moves its cursor - prints "accepted" and waits for its SIGKILL with every
cast blocked.

With ``--die-in-commit`` delivery 0 is committed alone, then deliveries
1..N-1 in one batch (``test_answer_queue.accept_a_batch_after_one``); the
process kills itself with SIGKILL inside that batch's commit, after its first
row. It prints each key acknowledged, as its acceptance returns.
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


class FailingClock:
    """A store's clock that, once ``armed``, fails its call number ``fail_at`` (one per row a commit writes):
    raising, or killing the process with SIGKILL."""

    def __init__(self, fail_at: int, *, kill: bool = False) -> None:
        self.armed = False
        self.calls = 0
        self._fail_at, self._kill = fail_at, kill

    def __call__(self) -> datetime:
        if self.armed:
            self.calls += 1
            if self.calls == self._fail_at:
                if self._kill:
                    os.kill(os.getpid(), signal.SIGKILL)
                raise RuntimeError("the store failed in the middle of a commit")
        return datetime.now(UTC)


def die_in_commit(state: str, count: int) -> None:
    from tests.bot.desk.test_answer_queue import accept_a_batch_after_one

    clock = FailingClock(fail_at=3, kill=True)
    store = SqliteStore(Path(state), clock=clock)
    clock.armed = True

    class Printing(AnswerQueue):
        def accept_many(self, deliveries: Sequence[tuple[str, list[Reply]]]) -> list[bool]:
            new = super().accept_many(deliveries)
            for key, _replies in deliveries:
                print(key, flush=True)
            return new

    accept_a_batch_after_one(Printing(store, lambda replies: [], lambda keys, answered: None), count)


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
