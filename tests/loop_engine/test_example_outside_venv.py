"""`python examples/deterministic_multistep_loop.py` works with any Python that has the dependencies.

Run as a script, Python puts examples/ on sys.path rather than the
repository; the example adds the repository itself. ``-S`` (no site module)
stands in for "a Python where loopbot is not installed": the venv's editable
install is a .pth file that only the site module reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jsonschema

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deterministic_multistep_loop.py"


def run(tmp_path: Path, pythonpath: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    return subprocess.run([sys.executable, "-S", str(EXAMPLE)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=env)


def test_it_runs_from_any_folder_where_loopbot_is_not_installed(tmp_path: Path) -> None:
    """The dependencies on PYTHONPATH (not loopbot: -S skips the editable install's .pth)."""
    packages = Path(jsonschema.__file__).resolve().parents[1]  # the site-packages holding the dependencies
    assert not (packages / "loop_engine").exists()
    done = run(tmp_path, str(packages))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("13/13 checks passed")


def test_without_the_dependencies_it_says_what_is_missing_and_what_works(tmp_path: Path) -> None:
    done = run(tmp_path, None)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "lacks '" in done.stderr and "which loop_engine needs" in done.stderr
    assert ".venv/bin/python examples/deterministic_multistep_loop.py" in done.stderr
