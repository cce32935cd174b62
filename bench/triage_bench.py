"""daily-triage of 5,000 issues against the fake GitHub: wall time and API calls vs the minimum pagination allows.

Propose (discovery: every open issue and PR, 100 a page; the pulls endpoint
only when a PR may lack reviewers), approve, apply (one label write per
changed issue, one re-read of what changed since the proposal), report.
Writes are not paced here (the fake has no limits) and no snapshots are
saved; run: ``.venv/bin/python bench/triage_bench.py [issues]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.patterns.triage import build  # noqa: E402
from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint, HumanDecision, ReviewResponse  # noqa: E402
from tests.fakes.github_triage import TriageGitHub, days_ago  # noqa: E402

REPO = "octo/ops"
TITLES = ["Crash on save", "Security: token in logs", "Add a debug switch", "Docs typo", "Regression in export"]


def main(size: int = 5_000) -> int:
    with TriageGitHub() as gh, tempfile.TemporaryDirectory() as tmp:
        gh.bulk(REPO, [{"number": n, "title": f"{TITLES[n % len(TITLES)]} {n}", "body": "details",
                        "updated_at": days_ago(40 if n % 9 == 0 else 1), "pr": n % 25 == 0,
                        "reviewers": ["bob"] if n % 50 == 0 else []} for n in range(1, size + 1)])
        spec = build({"repository": REPO, "base_url": gh.base_url, "state_dir": tmp, "max_changes": 100_000,
                      "writes_per_minute": None, "writes_per_hour": None}, environ={"GITHUB_TOKEN": "ghp_bench"})
        config = CheckpointConfig(checkpoint_dir=Path(tmp) / "checkpoints")
        started = time.perf_counter()
        engine = spec.engine_factory(checkpoint=HumanCheckpoint(config))
        paused = asyncio.run(engine.run(spec.context_factory(), trace_id="bench-run-1"))
        proposed = time.perf_counter()
        state = engine.state
        assert state.pending_review is not None, paused.reason
        response = ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=HumanDecision.APPROVE)
        engine = spec.engine_factory(checkpoint=HumanCheckpoint(config))
        done = asyncio.run(engine.resume(state, response))
        finished = time.perf_counter()
        report = done.output["report"]
        reads = len([c for c in gh.calls if c.method == "GET"])
        writes = len([c for c in gh.calls if c.method != "GET"])
        prs = sum(1 for n in range(1, size + 1) if n % 25 == 0)
        changed_pages = max(1, math.ceil(report["applied"] / 100))  # the re-read lists what we just labelled too
        minimum_reads = math.ceil(size / 100) + math.ceil(prs / 100) + 1
        minimum = minimum_reads + report["applied"]
        total = reads + writes
        print(f"daily-triage bench: {size:,} issues ({prs:,} PRs), {report['applied']:,} changes applied, "
              f"{report['skipped']:,} skipped; status {done.status.name}")
        print(f"wall time: {finished - started:.2f}s (propose {proposed - started:.2f}s, "
              f"apply+report {finished - proposed:.2f}s)")
        print(f"API calls: {total:,} = {reads:,} reads + {writes:,} writes; minimum pagination allows "
              f"{minimum:,} = {minimum_reads} reads (issues {math.ceil(size / 100)} pages, pulls "
              f"{math.ceil(prs / 100)}, re-check 1) + {report['applied']:,} writes "
              f"(re-check pages if it lists every issue labelled meanwhile: {changed_pages})")
        ratio = total / minimum
        print(f"calls / minimum = {ratio:.3f} ({'within' if ratio <= 1.10 else 'OVER'} 10%)")
        return 0 if ratio <= 1.10 and done.status.name == "COMPLETED" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("issues", nargs="?", type=int, default=5_000, help="open issues on the fake (default 5000)")
    sys.exit(main(parser.parse_args().issues))
