"""The worked example runs as a script and every check it prints passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deterministic_multistep_loop.py"


def test_example_script_passes_every_check() -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for name in (
        "failure recorded for step_2",
        "recovery linked to the failure",
        "step_2 attempts == 2",
        "all steps VERIFIED_COMPLETED",
        "transitions all in the table",
        "result COMPLETED",
        "never RUNNING at the end",
    ):
        assert any(line.startswith(f"[PASS] {name}:") for line in lines), (name, proc.stdout)
    assert not any(line.startswith("[FAIL]") for line in lines)
