"""Votes cast in batches through the vote journal until a SIGKILL: the process the crash test interrupts.

``python -m tests.bot.store.journal_child STATE FIRST`` casts batches of
counted votes on demo-1 and demo-2 (delivery keys ``k<n>`` from ``FIRST``
on), compacting every 7 lines, and prints each batch's keys once
``cast_votes`` returned - what a voter would have been told.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from bot.reviews import Vote
from bot.store import FileStore
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0


def main(state: str, first: int) -> None:
    store = FileStore(Path(state))
    store._reviews.compact_at = 7
    n = first
    while True:
        batch: dict[str, list[tuple[Vote, str | None]]] = {}
        keys = []
        for _ in range(1 + n % 4):
            vote = Vote(f"local:v{n % 5}", HumanDecision.APPROVE, at=T0 + timedelta(seconds=n), delivery_key=f"k{n}")
            batch.setdefault(f"demo-{n % 2 + 1}", []).append((vote, None))
            keys.append(f"k{n}")
            n += 1
        results = store.cast_votes(batch)
        assert all(not isinstance(r, Exception) and all(v.accepted for v in r) for r in results.values()), results
        print(" ".join(keys), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
