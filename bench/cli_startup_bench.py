"""How long a `loopbot` command takes to start, against a bare `python -c pass` measured in the same run.

Issue 13 target: `loopbot --help`, `loopbot status` and `loopbot decide
<unknown-id> approve` on a small config each take at most 5x the bare
interpreter's start-up (median). Every command is a fresh process, as a
person runs it; rounds interleave the commands so a busy machine slows them
alike. The last line says whether the target is met.

status and decide read the models' verdict on the config from a memo
(bot.config_memo) once the models have judged it; the rows marked "judged"
run them without one - what the first run after an edit costs, importing
pydantic - and are printed beside the target, not in it.

Run: ``.venv/bin/python bench/cli_startup_bench.py [--runs N]`` (or ``make bench``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

TARGET_RATIO = 5.0
LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT[0]).exists():  # not installed as a script: run the module
    LOOPBOT = [sys.executable, "-m", "bot.cli"]

CONFIG = """\
state_dir: ./state
loops:
  - name: demo
    pattern: demo
    schedule: {cron: "0 9 * * mon-fri", timezone: Europe/Berlin}   # status lists it, with its next run
    review: {reviewers: {local: [alice]}}
"""


#: The label mark of a run without the memo of config verdicts (not in the target).
JUDGED = " (judged)"


def commands() -> list[tuple[str, list[str], int]]:
    """(label, argv, expected exit code); the first is the baseline."""
    return [
        ("python -c pass", [sys.executable, "-c", "pass"], 0),
        ("loopbot --help", [*LOOPBOT, "--help"], 0),
        ("loopbot status", [*LOOPBOT, "status"], 0),
        ("loopbot decide nosuch-1 approve", [*LOOPBOT, "decide", "nosuch-1", "approve"], 2),
        ("loopbot status" + JUDGED, [*LOOPBOT, "status"], 0),
        ("loopbot decide nosuch-1 approve" + JUDGED, [*LOOPBOT, "decide", "nosuch-1", "approve"], 2),
    ]


def timed(argv: list[str], expected: int, cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - start
    if done.returncode != expected:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}, not {expected}:\n{done.stderr}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs of each command (default 15)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "config.yaml").write_text(CONFIG, encoding="utf-8")
        (folder / "state").mkdir()
        with contextlib.closing(sqlite3.connect(folder / "state" / "jobs.sqlite")) as jobs:  # as serve leaves it
            jobs.execute("CREATE TABLE apscheduler_jobs (id VARCHAR(191) PRIMARY KEY, next_run_time FLOAT, "
                         "job_state BLOB NOT NULL)")
            jobs.execute("INSERT INTO apscheduler_jobs VALUES ('loop:demo', ?, x'')", (time.time() + 3600,))
            jobs.commit()
        env = {**os.environ, "LOOPBOT_USER": "alice", "XDG_CACHE_HOME": str(folder / "cache")}
        env.pop("LOOPBOT_CONFIG", None)
        # An installed loopbot runs from bytecode (pip compiles it; a source tree's first run writes it):
        # a shell that forbids writing it would time Python compiling loopbot's source on every run.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        # no $XDG_CACHE_HOME and no $HOME: no memo, the models judge every time
        judging = {key: value for key, value in env.items() if key not in ("XDG_CACHE_HOME", "HOME")}
        plan = commands()

        def run(label: str, command: list[str], expected: int) -> float:
            return timed(command, expected, folder, judging if label.endswith(JUDGED) else env)

        for label, command, expected in plan:  # warm the file and bytecode caches (and the memo); not counted
            run(label, command, expected)
        times: dict[str, list[float]] = {label: [] for label, _, _ in plan}
        for _ in range(args.runs):
            for label, command, expected in plan:
                times[label].append(run(label, command, expected))
    medians = {label: statistics.median(values) * 1000 for label, values in times.items()}
    baseline = medians[plan[0][0]]
    width = max(len(label) for label in medians)
    print(f"{'command':<{width}}  median ms  x bare start-up   (N={args.runs}, {sys.executable})")
    missed = []
    for label, ms in medians.items():
        ratio = ms / baseline
        print(f"{label:<{width}}  {ms:9.1f}  {ratio:6.1f}x")
        if label != plan[0][0] and not label.endswith(JUDGED) and ratio > TARGET_RATIO:
            missed.append(f"{label} {ratio:.1f}x")
    verdict = "met" if not missed else f"missed by {', '.join(missed)}"
    print(f"target: each loopbot command <= {TARGET_RATIO:g}x `python -c pass`: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
