"""What the store's every-tick questions cost with 10 vs 10,000 open reviews, and what a snapshot save costs.

Issue 7.6 / 12: an idle bot must stay idle - a tick, a health check or a
status must cost what the work to do costs, never what the history kept
costs. Target: the tick's questions with 10,000 open reviews (+10,000
archived) within 2x of the figure with 10, when nothing changed. Also shown:
``list_reviews`` (returns every hot review, so it grows by nature),
``get_review`` of an unknown id (its did-you-mean looks at every id), and a
1,000-step ``save_state`` against the engine's own ``encode_state`` + atomic
write, measured in the same run (target ratio <= 1.2).

The 10,000 documents are written directly (no fsync) to keep setup short;
directories are then aged so the store's index trusts them, as it would
after an idle second or two. Run: ``.venv/bin/python bench/store_bench.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.persistence_bench import big_state  # noqa: E402
from bot.reviews import Review, ReviewPolicy  # noqa: E402
from bot.store import SqliteStore, OutboxTask, RunRecord, UnknownReviewError  # noqa: E402
from bot.store.documents import encode  # noqa: E402
from loop_engine.atomic import atomic_write_bytes  # noqa: E402
from loop_engine.serialization import encode_state  # noqa: E402

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
NOW = T0 + timedelta(minutes=30)
ROUNDS = 3
SAVE_PAIRS = 40


def timings_ms(action: Callable[[], object], reps: int) -> list[float]:
    action()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def review(n: int, status: str = "open") -> Review:
    return Review(
        id=f"demo-{n}",
        loop="demo",
        run_id=f"demo-run-{n}",
        checkpoint_id="checkpoint_0001",
        request={"checkpoint_id": "checkpoint_0001", "text": "Apply labels to 3 issues " * 4},
        policy=ReviewPolicy(remind_after=timedelta(hours=4), decide_after=timedelta(days=2)),
        created_at=T0 + timedelta(seconds=n),
        status=status,
    )


def populate(root: Path, open_count: int, archived_count: int) -> None:
    """A state dir as a busy bot leaves it: open reviews, their waiting runs, and a long history."""
    for sub in ("reviews", "runs", "archive/reviews", "archive/runs", "outbox"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for n in range(1, open_count + 1):
        (root / "reviews" / f"demo-{n}.json").write_bytes(encode(review(n).to_dict()))
        run = RunRecord(f"demo-run-{n}", "demo", "waiting", T0, T0, "cli", review_id=f"demo-{n}")
        (root / "runs" / f"demo-run-{n}.json").write_bytes(encode(run.to_dict()))
    for n in range(open_count + 1, open_count + archived_count + 1):
        (root / "archive" / "reviews" / f"demo-run-{n}~demo-{n}.json").write_bytes(
            encode(review(n, "applied").to_dict())
        )
        created = T0 + timedelta(seconds=n)
        run = RunRecord(f"demo-run-{n}", "demo", "completed", created, created, "cli")
        key = created.strftime("%Y%m%d%H%M%S%f")
        (root / "archive" / "runs" / f"{key}~demo-run-{n}.json").write_bytes(encode(run.to_dict()))
    store = SqliteStore(root)
    store.add_task(OutboxTask("demo-1.post.slack-c0123", "slack", "post", "demo-1", {"text": "hi"}, T0))
    past = time.time() - 60
    for sub in ("reviews", "runs", "archive/reviews", "archive/runs", "outbox"):
        os.utime(root / sub, (past, past))


def tick(store: SqliteStore) -> None:
    """What serve asks every 0.5 s and /healthz on every probe."""
    store.decided_reviews()
    store.due_reviews(NOW)
    store.next_deadline()
    store.counts()
    store.active_run("demo")
    store.due_tasks("slack", NOW)
    store.next_task_at("slack")
    store.problems()


def unknown(store: SqliteStore) -> None:
    try:
        store.get_review("demo-x7")
    except UnknownReviewError as err:
        assert 'did you mean "demo-7"' in str(err), err
    else:
        raise AssertionError("demo-x7 exists?")


def main() -> None:
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        stores = {}
        for label, (open_count, archived) in {"10": (10, 10), "10000": (10_000, 10_000)}.items():
            populate(Path(tmp) / label, open_count, archived)
            stores[label] = SqliteStore(Path(tmp) / label)
            tick(stores[label])  # the first scan reads every hot document once
        setup_s = time.perf_counter() - started
        actions: dict[str, tuple[Callable[[SqliteStore], object], int]] = {
            "tick (decided, due, next_deadline, counts, active_run, due_tasks, next_task_at, problems)": (tick, 200),
            "open_reviews (returns every open review)": (SqliteStore.open_reviews, 1),
            "list_reviews (returns every hot review)": (SqliteStore.list_reviews, 1),
            "get_review of an unknown id (did-you-mean)": (unknown, 20),
            "recent_runs(10)": (SqliteStore.recent_runs, 20),
        }
        for name, (action, reps) in actions.items():
            figures[name] = {"10": [], "10000": []}
            for _ in range(ROUNDS):
                for label, store in stores.items():
                    figures[name][label] += timings_ms(lambda s=store, a=action: a(s), reps)  # type: ignore[misc]

        state = big_state()
        snap_store = SqliteStore(Path(tmp) / "snap")
        engine_file = Path(tmp) / "engine" / "loop_state_bench.json"
        saves: dict[str, list[float]] = {"engine": [], "store": []}
        for _ in range(SAVE_PAIRS):  # alternated save by save: fsync times drift with the neighbours' load
            saves["engine"] += timings_ms(lambda: atomic_write_bytes(engine_file, encode_state(state)), 1)
            saves["store"] += timings_ms(lambda: snap_store.save_state("demo-run-1", state), 1)
        assert snap_store.load_state("demo-run-1") == state, "state did not round-trip"

    print(
        f"store: 10 vs 10,000 open reviews (+ as many archived reviews and runs); nothing changed between calls; "
        f"median of {ROUNDS} interleaved rounds; setup {setup_s:.1f} s; load average {os.getloadavg()[0]:.2f} "
        f"on {os.cpu_count()} CPUs"
    )
    tick_ratio = 0.0
    for name, by_label in figures.items():
        few, many = (statistics.median(by_label[k]) for k in ("10", "10000"))
        ratio = many / few if few else float("inf")
        if name.startswith("tick"):
            tick_ratio = ratio
        print(f"  {name:<92} {few:9.3f} ms  {many:9.3f} ms  ratio {ratio:7.1f}")
    engine, store_ms = (statistics.median(saves[k]) for k in ("engine", "store"))
    save_ratio = store_ms / engine
    print(f"  save of a 1,000-step state: engine encode_state + atomic write {engine:7.2f} ms, "
          f"store save_state {store_ms:7.2f} ms  ratio {save_ratio:.2f}")
    print(f"TARGET tick with 10,000 open reviews within 2x of 10: {'MET' if tick_ratio <= 2 else 'MISSED'} "
          f"(ratio {tick_ratio:.2f})")
    print(f"TARGET save_state within 1.2x of the engine's own save: {'MET' if save_ratio <= 1.2 else 'MISSED'} "
          f"(ratio {save_ratio:.2f})")


if __name__ == "__main__":
    main()
