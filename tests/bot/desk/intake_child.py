"""A webhook intake that accepts deliveries and never casts them: the process a kill -9 interrupts.

``python -m tests.bot.desk.intake_child STATE N`` accepts N GitHub votes on
review demo-1 (delivery keys ``hook:d-<n>``) through ``IntakeQueue.accept``
- what the webhook route calls before it answers 200 - prints "accepted"
and waits for its SIGKILL with every cast blocked.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from adapters.channel import Identity, Reply
from adapters.commands import parse_command
from bot.desk.intake import IntakeQueue
from bot.store import SqliteStore


def vote(n: int) -> Reply:
    voter = Identity("github", f"user{n}", f"user{n}")
    return Reply(voter, parse_command("approve demo-1"), dedupe_key=f"github:comment:{n}", via="github comment",
                 respond={"repository": "octo/ops", "comment_id": n})


def main(state: str, count: int) -> None:
    never = threading.Event()
    intake = IntakeQueue(SqliteStore(Path(state)), lambda reply: never.wait())
    intake.start()
    for n in range(count):
        assert intake.accept(f"hook:d-{n}", [vote(n)])
    print("accepted", flush=True)
    never.wait()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
