"""Issue 3 item 8: pause in one process, SIGKILL it, resume with APPROVE in another.

The resumed result must equal a straight run whose decision handler approves.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("cross_process_loop.py")


def start(mode: str, state_dir: Path, trace: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, str(state_dir), trace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(mode: str, state_dir: Path, trace: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(state_dir), trace], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    [line] = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def wait_for_line(proc: subprocess.Popen[str], prefix: str, deadline_s: float = 30.0) -> str:
    deadline = time.monotonic() + deadline_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line.strip()
        if not line and proc.poll() is not None:
            raise AssertionError(f"process exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
    raise AssertionError(f"no {prefix!r} line within {deadline_s}s")


def test_pause_kill_resume_equals_a_straight_approving_run(tmp_path: Path) -> None:
    paused_dir, straight_dir = tmp_path / "paused", tmp_path / "straight"
    proc = start("run", paused_dir, "xp-1")
    try:
        line = wait_for_line(proc, "PAUSED")
        assert line == "PAUSED PAUSED checkpoint_0001"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert (paused_dir / "loop_state_xp-1.json").exists()

    resumed = finish("resume", paused_dir, "xp-1")
    straight = finish("straight", straight_dir, "xp-1")

    assert resumed["status"] == "COMPLETED"
    assert resumed["iterations"] == 5  # four steps + one retry of step_2
    assert resumed["outputs"]["step_2"]["value"] == 4
    assert [f[1:] for f in resumed["failures"]] == [f[1:] for f in straight["failures"]]
    assert len(resumed["failures"]) == 1 and resumed["failures"][0][3] == "RECOVERED"
    for key in ("status", "execution_state", "iterations", "outputs"):
        assert resumed[key] == straight[key], key
    assert [r[0::2] for r in resumed["recoveries"]] == [r[0::2] for r in straight["recoveries"]]
