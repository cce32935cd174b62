"""A channel whose messages are lines of a ledger file: the outside world a crash cannot roll back.

Like Slack's message metadata or GitHub's marker, ``post_request`` first
looks for a message it already made for this review and target, so a task
retried after kill -9 finds it instead of posting again. ``hold`` makes it
pause right after writing a message (before the bot records it): the window
a kill -9 aims at.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.channel import Answer, MessageRef, ReviewPost, Target


class LedgerChannel:
    name = "slack"

    def __init__(self, ledger: Path, hold: float = 0.0) -> None:
        self.ledger = ledger
        self.hold = hold

    def messages(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        for number, message in enumerate(self.messages()):
            if (message["review"], message["target"]) == (post.review_id, target.key):
                return MessageRef(self.name, {"line": number})  # found after a crash: never posted twice
        number = len(self.messages())
        with self.ledger.open("a") as ledger:
            ledger.write(json.dumps({"review": post.review_id, "target": target.key}) + "\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        if self.hold:
            print("posted", flush=True)
            time.sleep(self.hold)
        return MessageRef(self.name, {"line": number})

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        raise NotImplementedError

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        raise NotImplementedError

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        raise NotImplementedError


def main(state_dir: str, ledger: str) -> None:
    """The child process: deliver the due Slack tasks, holding after each message."""
    from datetime import UTC, datetime

    from bot.desk import ReviewDesk, local_channel
    from bot.store import SqliteStore

    store = SqliteStore(state_dir)
    channel = LedgerChannel(Path(ledger), hold=60)
    desk = ReviewDesk(store, {"local": local_channel(Path(state_dir)), "slack": channel},
                      clock=lambda: datetime.now(UTC))
    desk.outbox.deliver_due("slack")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
