"""Every bench/*.py still imports and answers ``--help``: a rename elsewhere must not leave a bench broken unseen.

A bench is run by hand (``make bench``), rarely, so nothing else notices when
an import it uses is renamed away. ``--help`` imports the bench as its run
does and exits before any measuring, so all of them are checked in a few
seconds, each in its own interpreter, all at once; a module the benches
share (no ``__main__``) is imported as they import it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHES = sorted((REPO / "bench").glob("*.py"))


def _is_script(bench: Path) -> bool:
    return 'if __name__ == "__main__":' in bench.read_text(encoding="utf-8")


def test_there_are_benches_to_check() -> None:
    assert {"run_all.py", "cli_startup_bench.py", "replicas_bench.py"} <= {b.name for b in BENCHES if _is_script(b)}


def test_every_bench_imports_and_prints_its_help() -> None:
    running = {}
    for bench in BENCHES:
        argv = [str(bench), "--help"] if _is_script(bench) else ["-c", f"import bench.{bench.stem}"]
        running[bench] = subprocess.Popen([sys.executable, *argv], cwd=REPO, text=True, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, start_new_session=True)
    broken = []
    for bench, process in running.items():
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # it ignored --help and started measuring
            os.killpg(process.pid, signal.SIGKILL)  # and whatever it started
            process.communicate()
            broken.append(f"{bench.name}: still running after 60 s: --help did not stop it")
            continue
        if process.returncode != 0 or (_is_script(bench) and not out.startswith("usage:")):
            broken.append(f"{bench.name}: exit {process.returncode}\n{out[-500:]}{err[-2000:]}")
    assert not broken, "\n\n".join(broken)
