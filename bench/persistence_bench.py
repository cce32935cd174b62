"""How long a durable JSON save + load takes, and whether it grows with the runs stored.

Issue 3 targets: save + load of a state with 1,000 steps, 1,000 failures and
1,000 observations <= 15 ms (median), and save time with 10,000 other
snapshots in the directory within 20 % of the time with 10. A baseline
(stdlib ``json.dumps`` + write, no fsync, no checks) is measured in the same
run so the figures can be judged on whatever machine prints them.

Run: ``.venv/bin/python bench/persistence_bench.py`` (or ``make bench``).
"""

from __future__ import annotations

import json
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
from loop_engine.serialization import state_from_dict, state_to_dict  # noqa: E402
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
N = 1000


def big_state() -> LoopState:
    now = datetime(2026, 1, 1, 12, 0, 0)
    steps = [
        Step(id=f"step_{i}", description=f"do thing {i}", dependencies=[f"step_{i - 1}"] if i else [],
             status=StepStatus.VERIFIED_COMPLETED, output={"result": i, "files": [f"f{i}.py"]},
             start_time=now, end_time=now, metadata={"tool": "edit"}, evaluation_passed=True, attempts=1)
        for i in range(N)
    ]
    plan = Plan(id="plan", goal="benchmark", steps=steps, created_at=now)
    return LoopState(
        status=LoopStatus.RUNNING, current_iteration=N, current_plan=plan, current_step=steps[-1],
        observations=[Observation(timestamp=now, content={"stdout": f"line {i}"}, source="actor", step_id=f"step_{i}")
                      for i in range(N)],
        failures=[Failure(failure_id=f"f{i}", message=f"tool error {i}", step_id=f"step_{i}", timestamp=now,
                          status=FailureStatus.RECOVERED, recovery_attempts=1, context={"exit": 1}) for i in range(N)],
        counters={"actor": N}, context=LoopContext(goal="benchmark", budget=Budget(max_cost=10.0, cost_used=1.0)),
        trace_id="bench", started_at=now, updated_at=now,
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


def main() -> None:
    state = big_state()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = LoopStatePersistence(PersistenceConfig(state_dir=root / "a", format="json", durable=True))
        path = store.save(state, trace_id="bench")
        size_kb = path.stat().st_size / 1024

        baseline_file = root / "baseline.json"
        baseline = median_ms(lambda: baseline_file.write_text(json.dumps(state_to_dict(state)), "utf-8"))
        save = median_ms(lambda: store.save(state, trace_id="bench"))
        document = {"schema_version": 1, "state": state_to_dict(state)}
        text = orjson.dumps(document)
        parts = {
            "state_to_dict (copy + check)": median_ms(lambda: state_to_dict(state)),
            "orjson.dumps": median_ms(lambda: orjson.dumps(document)),
            "orjson.loads (part of load)": median_ms(lambda: orjson.loads(text)),
            "state_from_dict (part of load)": median_ms(lambda: state_from_dict(document["state"])),
        }
        load = median_ms(lambda: store.load("bench"))
        both_samples = timings_ms(lambda: store.load(store.save(state, trace_id="bench").stem[len("loop_state_"):]))
        both, best = statistics.median(both_samples), min(both_samples)
        assert store.load("bench") == state, "benchmark state did not round-trip"

        small_text = path.read_text("utf-8")[:2000]
        few = LoopStatePersistence(PersistenceConfig(state_dir=root / "few", format="json"))
        many = LoopStatePersistence(PersistenceConfig(state_dir=root / "many", format="json"))
        fill(root / "few", 10, small_text)
        fill(root / "many", 10_000, small_text)
        # interleave the two so drift on the machine hits both alike
        few_samples, many_samples = [], []
        for _ in range(3):
            few_samples.append(median_ms(lambda: few.save(state, trace_id="bench"), reps=10))
            many_samples.append(median_ms(lambda: many.save(state, trace_id="bench"), reps=10))
        few_ms, many_ms = statistics.median(few_samples), statistics.median(many_samples)

    ratio = many_ms / few_ms
    verdict = "OK" if both <= TARGET_MS else "MISSED"
    flat = "OK" if abs(ratio - 1) <= 0.20 else "MISSED"
    load_1m = os.getloadavg()[0]
    print(f"persistence: state with {N} steps, {N} failures, {N} observations; JSON {size_kb:.0f} KiB; durable; "
          f"median of {REPS}; load average {load_1m:.2f} on {os.cpu_count()} CPUs")
    print(f"  baseline json.dumps+write (no fsync, no checks): {baseline:7.2f} ms")
    print(f"  save (atomic, fsync, history 10):                {save:7.2f} ms")
    for name, cost in parts.items():
        print(f"    of which {name:<39}{cost:7.2f} ms")
    print(f"  load:                                            {load:7.2f} ms")
    print(f"  save + load:                                     {both:7.2f} ms   target <= {TARGET_MS:.0f} ms  {verdict}"
          f"  (best of {REPS}: {best:.2f} ms)")
    print(f"  save with 10 other snapshots:                    {few_ms:7.2f} ms")
    print(f"  save with 10,000 other snapshots:                {many_ms:7.2f} ms   ratio {ratio:.2f} "
          f"(target within 20 %)  {flat}")


if __name__ == "__main__":
    main()
