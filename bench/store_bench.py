"""The store's operations on SQLite, PostgreSQL and the old directory store, side by side, in one run.

Operations: create a run, save a snapshot (a 1,000-step state), cast a
batch of 50 votes (one review's, as the Slack intake batches them; on a
review that has 5,000 votes of 50 people already; and on one that has the
current votes of 5,000 people: a vote's cost must grow with neither), the
tick's ``due_reviews``, and ``open_reviews`` with 10 and with 10,000 open
reviews (+10,000 ended). Each figure is the median of several timings, in
milliseconds; the ratios to SQLite are printed beside them.

The directory store is gone from this tree: ``--files-at REF`` measures it
on a git worktree of REF (a commit that still has it, e.g. the last one
before its removal), running this same script there with ``--only files``.
PostgreSQL is measured when the test cluster can start (tests/bot/store/
pg_cluster.py), skipped otherwise. Run::

    .venv/bin/python bench/store_bench.py [--files-at REF] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if os.environ.get("STORE_BENCH_CODE") is None:
    sys.path.insert(0, str(ROOT))

from bench.persistence_bench import big_state  # noqa: E402
from bot.review_records import Review, ReviewPolicy, Vote  # noqa: E402
from bot.store import RunRecord  # noqa: E402
from loop_engine.checkpoint import HumanDecision  # noqa: E402

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=30)
OPS = ("create run", "save snapshot", "cast 50 votes", "cast 50 votes (after 5,000)",
       "cast 50 votes (after 5,000 voters)", "due_reviews (10,000 open)", "open_reviews (10 open)",
       "open_reviews (10,000 open)")


def median_ms(action: Callable[[], object], reps: int) -> float:
    action()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def review(n: int, status: str = "open") -> Review:
    return Review(
        id=f"demo-{n}", loop="demo", run_id=f"demo-run-{n}", checkpoint_id="checkpoint_0001",
        request={"checkpoint_id": "checkpoint_0001", "text": "Apply labels to 3 issues " * 4},
        policy=ReviewPolicy(approvals_required=10_000, remind_after=timedelta(hours=4),
                            decide_after=timedelta(days=2)),
        created_at=T0 + timedelta(seconds=n), status=status,
    )


def populate(store: Any, open_count: int, ended: int) -> None:
    """Open reviews with their waiting runs, and a history of ended ones (through the store's own API)."""
    reviews, runs = [], []
    for n in range(1, open_count + ended + 1):
        made = review(n, "open" if n <= open_count else "applied")
        made.applied_at = None if n <= open_count else T0
        reviews.append(made)
        runs.append(RunRecord(f"demo-run-{n}", "demo", "waiting" if n <= open_count else "completed",
                              made.created_at, T0, "cli", review_id=made.id))
    if hasattr(store, "put_records"):  # the SQL store: one transaction
        store.put_records(runs, reviews)
        return
    for run, made in zip(runs, reviews, strict=True):  # the directory store: a file each
        store.put_review(made)
        store.put_run(run)


def open_store(kind: str, root: Path, pg: str | None) -> Any:
    if kind == "files":
        from bot.store import FileStore  # type: ignore[attr-defined]  # only in trees that still have it

        return FileStore(root)
    if kind == "sqlite":
        from bot.store import SqliteStore

        return SqliteStore(root)
    from bot.store.sql import PostgresStore

    assert pg is not None
    return PostgresStore(pg, schema="bench_" + root.name.replace("-", "_"))


def measure(kind: str, pg: str | None = None) -> dict[str, float]:
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix=f"store-bench-{kind}-") as tmp:
        small, big = open_store(kind, Path(tmp) / "small", pg), open_store(kind, Path(tmp) / "big", pg)
        populate(small, 10, 10)
        populate(big, 10_000, 10_000)
        counter = iter(range(100_000, 10**9))
        figures["create run"] = median_ms(
            lambda: small.put_run(RunRecord(f"x-run-{next(counter)}", "x", "running", T0, T0, "cli")), 30)
        state = big_state()
        figures["save snapshot"] = median_ms(lambda: small.save_state("demo-run-1", state), 15)
        votes = iter(range(10**9))

        def batch(review_id: str = "demo-5000", people: int = 50) -> None:
            """50 votes; ``people``: how many voters they come from (the n-th vote's is v{n % people})."""
            casts = []
            for _ in range(50):
                n = next(votes)
                casts.append((Vote(f"local:v{n % people}", HumanDecision.APPROVE, at=NOW, delivery_key=f"k{n}"),
                              None))
            result = big.cast_votes({review_id: casts})[review_id]
            assert not isinstance(result, Exception), result

        figures["cast 50 votes"] = median_ms(batch, 10)
        for _ in range(100):  # a review with a long audit trail: a vote must cost what it costs on a new one
            batch("demo-4000")
        figures["cast 50 votes (after 5,000)"] = median_ms(lambda: batch("demo-4000"), 10)
        for _ in range(100):  # 5,000 people's current votes, each a new voter's: nor may it grow with them
            batch("demo-3000", 10**9)
        figures["cast 50 votes (after 5,000 voters)"] = median_ms(lambda: batch("demo-3000", 10**9), 10)
        figures["due_reviews (10,000 open)"] = median_ms(lambda: big.due_reviews(NOW), 10)
        figures["open_reviews (10 open)"] = median_ms(small.open_reviews, 20)
        figures["open_reviews (10,000 open)"] = median_ms(big.open_reviews, 3)
        for store in (small, big):
            if hasattr(store, "close"):
                store.close()
    return figures


def files_at(ref: str) -> dict[str, float]:
    """The directory store's figures, measured by this script on a worktree of ``ref``."""
    with tempfile.TemporaryDirectory(prefix="store-bench-tree-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref], check=True,
                       capture_output=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree), "STORE_BENCH_CODE": str(tree)}
            done = subprocess.run([sys.executable, __file__, "--only", "files"], env=env, cwd=tree,
                                  capture_output=True, text=True, check=True)
            return dict(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def postgres_url() -> str | None:
    sys.path.insert(0, str(ROOT))
    from tests.bot.store import pg_cluster

    if pg_cluster.unavailable() is not None:
        return None
    return pg_cluster.url()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files-at", metavar="REF", help="also measure the directory store of commit REF")
    parser.add_argument("--only", choices=("files", "sqlite", "postgres"), help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="OUT", help="also write the figures to OUT")
    args = parser.parse_args()
    if args.only == "files":
        print(json.dumps(measure("files")))
        return 0
    columns: dict[str, dict[str, float]] = {"sqlite": measure("sqlite")}
    url = postgres_url()
    if url is not None:
        columns["postgres"] = measure("postgres", url)
    if args.files_at:
        columns["directory store"] = files_at(args.files_at)
    names = list(columns)
    print(f"{'operation (median ms)':32}" + "".join(f"{name:>18}" for name in names) + "   ratios to sqlite")
    for op in OPS:
        base = columns["sqlite"][op]
        ratios = "  ".join(f"{name} {columns[name][op] / base:.2f}x" for name in names[1:])
        print(f"{op:32}" + "".join(f"{columns[name][op]:>18.2f}" for name in names) + f"   {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps(columns, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
