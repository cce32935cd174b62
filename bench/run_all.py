"""Run every ``bench/*_bench.py`` in turn (``make bench``); benches print their own figures.

Each bench runs in its own interpreter so one bench's imports, caches and
garbage cannot colour another's numbers. Exits non-zero if any bench failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    here = Path(__file__).resolve().parent
    failed = []
    for bench in sorted(here.glob("*_bench.py")):
        print(f"== {bench.name}", flush=True)
        if subprocess.run([sys.executable, str(bench)], cwd=here.parent).returncode != 0:
            failed.append(bench.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
