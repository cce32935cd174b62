"""How long a durable JSON save + load takes, and whether it grows with the runs stored.

Issue 3 targets: save + load of a state with 1,000 steps, 1,000 failures and
1,000 observations <= 15 ms (median), and save time with 10,000 other
snapshots in the directory within 20 % of the time with 10. A baseline (the
same document through orjson and the file system with no checks, no objects
and no fsync - the floor) is measured in the same run, interleaved with the
real figures, so they can be judged on whatever machine prints them; the
last two lines say whether each target is met.

Run: ``.venv/bin/python bench/persistence_bench.py`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loop_engine.persistence import LoopStatePersistence, PersistenceConfig  # noqa: E402
from loop_engine.deserialization import state_from_dict  # noqa: E402
from loop_engine.serialization import encode_state  # noqa: E402
from loop_engine.types import (  # noqa: E402
    Budget,
    Failure,
    FailureStatus,
    LoopContext,
    LoopState,
    LoopStatus,
    Observation,
    Plan,
    Step,
    StepStatus,
)

TARGET_MS = 15.0
REPS = 30
ROUNDS = 3
N = 1000


def big_state() -> LoopState:
    now = datetime(2026, 1, 1, 12, 0, 0)
    steps = [
        Step(
            id=f"step_{i}",
            description=f"do thing {i}",
            dependencies=[f"step_{i - 1}"] if i else [],
            status=StepStatus.VERIFIED_COMPLETED,
            output={"result": i, "files": [f"f{i}.py"]},
            start_time=now,
            end_time=now,
            metadata={"tool": "edit"},
            evaluation_passed=True,
            attempts=1,
        )
        for i in range(N)
    ]
    plan = Plan(id="plan", goal="benchmark", steps=steps, created_at=now)
    return LoopState(
        status=LoopStatus.RUNNING,
        current_iteration=N,
        current_plan=plan,
        current_step=steps[-1],
        observations=[
            Observation(timestamp=now, content={"stdout": f"line {i}"}, source="actor", step_id=f"step_{i}")
            for i in range(N)
        ],
        failures=[
            Failure(
                failure_id=f"f{i}",
                message=f"tool error {i}",
                step_id=f"step_{i}",
                timestamp=now,
                status=FailureStatus.RECOVERED,
                recovery_attempts=1,
                context={"exit": 1},
            )
            for i in range(N)
        ],
        counters={"actor": N},
        context=LoopContext(goal="benchmark", budget=Budget(max_cost=10.0, cost_used=1.0)),
        trace_id="bench",
        started_at=now,
        updated_at=now,
    )


def timings_ms(action: Callable[[], object], reps: int = REPS) -> list[float]:
    action()  # warm up caches and the history sequence
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def median_ms(action: Callable[[], object], reps: int = REPS) -> float:
    return statistics.median(timings_ms(action, reps))


def fill(directory: Path, count: int, text: str) -> None:
    """``count`` other runs' snapshots, as a busy state dir would hold."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"loop_state_other-{i}.json").write_text(text, "utf-8")


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)  # --help; no options
    state = big_state()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = LoopStatePersistence(PersistenceConfig(state_dir=root / "a", format="json", durable=True))
        path = store.save(state, trace_id="bench")
        size_kb = path.stat().st_size / 1024

        # The floor on this machine: the same bytes through orjson and the file
        # system, with no checks, no objects built, no fsync.
        plain = orjson.loads(encode_state(state))
        baseline_file = root / "baseline.json"

        def baseline_round_trip() -> None:
            baseline_file.write_bytes(orjson.dumps(plain))
            orjson.loads(baseline_file.read_bytes())

        def save_and_load() -> None:
            store.save(state, trace_id="bench")
            store.load("bench")

        # interleaved rounds, so a burst of load on the machine hits every figure alike
        samples: dict[str, list[float]] = {"baseline": [], "save": [], "load": [], "both": []}
        for _ in range(ROUNDS):
            samples["baseline"] += timings_ms(baseline_round_trip, REPS // ROUNDS)
            samples["save"] += timings_ms(lambda: store.save(state, trace_id="bench"), REPS // ROUNDS)
            samples["load"] += timings_ms(lambda: store.load("bench"), REPS // ROUNDS)
            samples["both"] += timings_ms(save_and_load, REPS // ROUNDS)
        baseline, save, load, both = (statistics.median(samples[k]) for k in ("baseline", "save", "load", "both"))
        best = min(samples["both"])
        assert store.load("bench") == state, "benchmark state did not round-trip"

        text = encode_state(state)
        document = orjson.loads(text)
        parts = {
            "encode_state (check + orjson.dumps)": median_ms(lambda: encode_state(state)),
            "orjson.loads (part of load)": median_ms(lambda: orjson.loads(text)),
            "state_from_dict (part of load)": median_ms(lambda: state_from_dict(document["state"])),
        }

        small_text = path.read_text("utf-8")[:2000]
        few = LoopStatePersistence(PersistenceConfig(state_dir=root / "few", format="json"))
        many = LoopStatePersistence(PersistenceConfig(state_dir=root / "many", format="json"))
        fill(root / "few", 10, small_text)
        fill(root / "many", 10_000, small_text)
        few_samples: list[float] = []
        many_samples: list[float] = []
        for _ in range(ROUNDS):
            few_samples += timings_ms(lambda: few.save(state, trace_id="bench"), REPS // ROUNDS)
            many_samples += timings_ms(lambda: many.save(state, trace_id="bench"), REPS // ROUNDS)
        few_ms, many_ms = statistics.median(few_samples), statistics.median(many_samples)

    ratio = many_ms / few_ms
    met = both <= TARGET_MS
    flat = ratio <= 1.20  # growth is what the target rules out; a faster run with more files is noise
    load_1m = os.getloadavg()[0]
    print(
        f"persistence: state with {N} steps, {N} failures, {N} observations; JSON {size_kb:.0f} KiB; durable; "
        f"median of {REPS} in {ROUNDS} interleaved rounds; load average {load_1m:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  baseline (orjson dumps+write+read+loads; no checks, objects or fsync): {baseline:7.2f} ms")
    print(f"  save (checks, atomic write, fsync file + dir, history 10):              {save:7.2f} ms")
    for name, cost in parts.items():
        print(f"    of which {name:<62}{cost:7.2f} ms")
    print(f"  load:                                                                   {load:7.2f} ms")
    print(
        f"  save + load:                                                            {both:7.2f} ms"
        f"   = {both / baseline:.1f} x baseline; best {best:.2f} ms"
    )
    print(f"  save with 10 other snapshots:                                           {few_ms:7.2f} ms")
    print(
        f"  save with 10,000 other snapshots:                                       {many_ms:7.2f} ms"
        f"   ratio {ratio:.2f}"
    )
    print(f"TARGET save + load <= {TARGET_MS:.0f} ms: {'MET' if met else 'MISSED'} ({both:.2f} ms)")
    print(
        f"TARGET save time with 10,000 snapshots at most 20 % above 10: "
        f"{'MET' if flat else 'MISSED'} (ratio {ratio:.2f})"
    )
    if not met and load_1m > 0.5 * (os.cpu_count() or 1):
        print("  note: the machine was busy (load average above); rerun when it is quiet")


if __name__ == "__main__":
    main()
