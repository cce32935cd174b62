"""An answer queue that accepts deliveries and never casts them: the process a kill -9 interrupts.

``python -m tests.bot.desk.answer_queue_child STATE N`` accepts N GitHub votes
on review demo-1 (delivery keys ``hook:d-<n>``) through ``AnswerQueue.accept``
- what the webhook route calls before it answers 200, and the poller before
it moves its cursor - prints "accepted" and waits for its SIGKILL with every
cast blocked.
"""

from __future__ import annotations

import sys
import threading
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
    main(sys.argv[1], int(sys.argv[2]))
