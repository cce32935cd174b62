"""What a vote costs the replica that casts it, by the size of the batch it arrives in (issue 19's "where the time
goes with 3").

Three replicas on one PostgreSQL split the votes three ways, so each casts
smaller batches than one replica does (here about 1-2 votes a batch against
4-5). Each batch pays a fixed cost - the preparer's read of its reviews, the
cast's transaction and statements, psycopg's own work per statement - and
each vote its own. This measures both on the store alone, in the replica's
process (CPU seconds of this process, not wall time): the same prepare read
and cast the Slack intake makes (``get_reviews`` then ``cast_votes``), on 20
open reviews whose reviewers are 1,200 listed people (new ones for each
measurement, so none has more votes to count than another), with batches of
1 to 16 new voters' approvals spread over the reviews. Printed: the median
CPU per vote of each size over several rounds, and its ratio to the batch of
16 (the baseline of the same run); the fixed cost per batch and the cost per
vote that fit them. On PostgreSQL, the replicas' engine (skipped when its
test cluster cannot start). Run::

    .venv/bin/python bench/cast_batch_bench.py [--votes 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.review_records import Review, ReviewPolicy, Reviewers, Vote  # noqa: E402
from loop_engine.checkpoint import HumanDecision  # noqa: E402

SIZES = (1, 2, 4, 8, 16)
REVIEWS = 20
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _reviews(store: Any, numbers: Iterator[int]) -> list[str]:
    people = Reviewers(slack_users=[f"U{n:05d}" for n in range(1200)])
    made = [Review(id=f"demo-{n}", loop="demo", run_id=f"demo-run-{n}", checkpoint_id="checkpoint_0001",
                   request={"checkpoint_id": "checkpoint_0001", "text": "Apply labels to 3 issues"},
                   policy=ReviewPolicy(reviewers=people, approvals_required=10**6), created_at=T0)
            for n in itertools.islice(numbers, REVIEWS)]
    store.put_records([], made)
    return [review.id for review in made]


def _cpu_per_vote(store: Any, size: int, votes: int, numbers: Iterator[int]) -> float:
    """CPU ms per vote of casting ``votes`` on new reviews in batches of ``size`` (each read first, as the
    preparer does)."""
    ids = _reviews(store, numbers)
    started = time.process_time()
    for first in range(0, votes, size):
        batch: dict[str, list[tuple[Vote, None]]] = {}
        for n in range(first, first + size):
            voter = next(numbers)
            vote = Vote(f"slack:U{voter:07d}", HumanDecision.APPROVE, at=T0, source="slack", delivery_key=f"t{voter}")
            batch.setdefault(ids[n % REVIEWS], []).append((vote, None))
        store.get_reviews(list(batch))
        store.cast_votes(batch)
    return (time.process_time() - started) * 1000 / votes


def measure(votes: int, rounds: int) -> dict[int, float]:
    from bot.store.sql import PostgresStore
    from tests.bot.store import pg_cluster

    store = PostgresStore(pg_cluster.url(), schema="bench_cast_batch")
    try:
        numbers = itertools.count(1)
        _cpu_per_vote(store, 4, votes // 2, numbers)  # warm: connections, statements prepared
        samples: dict[int, list[float]] = {size: [] for size in SIZES}
        for n in range(rounds):  # sizes interleaved, the order reversed every other round
            for size in SIZES if n % 2 == 0 else SIZES[::-1]:
                samples[size].append(_cpu_per_vote(store, size, votes, numbers))
    finally:
        store.close()
    return {size: statistics.median(values) for size, values in samples.items()}


def _fit(figures: dict[int, float]) -> tuple[float, float]:
    """(fixed ms per batch, ms per vote): least squares of batch cost = fixed + size * per vote."""
    sizes, costs = list(figures), [size * per_vote for size, per_vote in figures.items()]
    mean_size, mean_cost = statistics.fmean(sizes), statistics.fmean(costs)
    slope = (sum((s - mean_size) * (c - mean_cost) for s, c in zip(sizes, costs, strict=True))
             / sum((s - mean_size) ** 2 for s in sizes))
    return mean_cost - slope * mean_size, slope


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=400, help="votes per batch size and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, sizes interleaved")
    args = parser.parse_args()
    from tests.bot.store import pg_cluster

    if pg_cluster.unavailable() is not None:  # as store_bench: nothing to measure here, not a failure
        print(f"skipped: PostgreSQL cannot start here ({pg_cluster.unavailable()})")
        return 0
    print(f"CPU of this process per vote (prepare read + cast) on PostgreSQL, {args.votes} votes per size and "
          f"round, {args.rounds} rounds, {REVIEWS} new reviews of 1,200 listed reviewers each time")
    try:
        figures = measure(args.votes, args.rounds)
    finally:
        pg_cluster.stop()
    fixed, per_vote = _fit(figures)
    base = figures[SIZES[-1]]
    cells = "   ".join(f"{size:>2}: {ms:.3f} ms ({ms / base:.2f}x)" for size, ms in figures.items())
    print(f"  by batch size: {cells}")
    print(f"  fit: {fixed:.3f} ms per batch + {per_vote:.3f} ms per vote")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
