"""How rendering a review for Slack grows with its proposal: 100, 1,000 and 10,000 rows, and the ratios.

Three shapes, each a fresh ``render_*`` call timed (median of ``--rounds``):

- a review whose proposal is one table of N rows (past a few hundred rows it
  is uploaded as files, the message showing its start);
- a review whose proposal is N small sections, so N blocks to pack into the
  message and its thread replies (then files);
- a thread reply (``render_update``) of N/10 lines of 3,000 characters, which
  goes on over as many replies as it needs (no files for an update).

Every block is measured once and messages are filled with running totals
(``adapters.slack.render``), so ten times the rows should cost about ten
times the time; the last lines say whether each shape's 10,000/1,000 ratio
is at most ``MAX_RATIO`` (a quadratic packing gives about 100).

Run: ``.venv/bin/python bench/slack_render_bench.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.channel import ReviewPost  # noqa: E402
from adapters.slack.render import render_review, render_update  # noqa: E402
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest  # noqa: E402
from loop_engine.proposal import ChangeList, Proposal, Table  # noqa: E402

SIZES = (100, 1_000, 10_000)
#: time(10,000) / time(1,000) at most: ten times the rows, at most 15 times the time.
MAX_RATIO = 15.0


def _post(proposal: Proposal) -> ReviewPost:
    request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_PLAN_COMPLETE, {"iteration": 1},
                            "Apply the labels", {"repository": "octo/ops"}, datetime(2026, 11, 29, 8, 43), "",
                            proposal)
    return ReviewPost(review_id="triage-17", loop="triage", run_id="triage-run-3", request=request,
                      reviewers={"slack": ("U0AAA", "U0BBB")}, approvals_required=1)


def table_review(rows: int) -> Callable[[], Any]:
    table = Table(["issue", "title", "change"],
                  [[f"#{n}", f"Crash <@U0EVIL> on start & save {n}", "add P1"] for n in range(rows)], title="Changes")
    post = _post(Proposal(f"Approve to apply {rows} label changes", [table]))
    return lambda: render_review(post)


def sections_review(sections: int) -> Callable[[], Any]:
    post = _post(Proposal("Approve the changes", [ChangeList([f"#{n}: add label P1"]) for n in range(sections)]))
    return lambda: render_review(post)


def long_update(lines: int) -> Callable[[], Any]:
    text = "\n".join(f"line {n}: " + "x" * 3000 for n in range(max(lines // 10, 1)))
    return lambda: render_update(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="renders of each size (default 5)")
    args = parser.parse_args(argv)
    shapes = {"table rows": table_review, "proposal sections": sections_review, "update lines/10": long_update}
    missed = []
    print(f"{'shape':<18} " + " ".join(f"{size:>10,}" for size in SIZES) + "   10k/1k  1k/100  (ms, median)")
    for name, make in shapes.items():
        medians = []
        for size in SIZES:
            render = make(size)
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                render()
                times.append(time.perf_counter() - started)
            medians.append(statistics.median(times) * 1000)
        big, small = medians[2] / medians[1], medians[1] / medians[0]
        print(f"{name:<18} " + " ".join(f"{ms:10.2f}" for ms in medians) + f"   {big:6.1f}x {small:6.1f}x")
        if big > MAX_RATIO:
            missed.append(f"{name} {big:.1f}x")
    verdict = "met" if not missed else f"MISSED by {', '.join(missed)}"
    print(f"target: time at 10,000 <= {MAX_RATIO:g}x the time at 1,000 for every shape: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
