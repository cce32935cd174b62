"""200 ``loopbot decide`` at once against serving bots: none lost, none doubled, each review applied once.

The one body of that check, for each store engine: SQLite
(test_sqlite_decides.py, one serve whose writes race the decides' own
connections) and PostgreSQL (test_replicas.py, the decides spread over
three replicas' configs). The caller configures and starts its bots with a
``demo`` loop of ``VOTERS`` reviewers, all four of them required.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from bot.store.base import Store

from .conftest import Workspace, demo_loop, wait_for

__all__ = ["VOTERS", "DECIDES", "loop", "two_hundred_decides_lose_none_and_double_none"]

VOTERS = ["v1", "v2", "v3", "v4"]
#: 50 reviews x 4 voters.
DECIDES = 200
#: Processes the decides run in: two CPUs here cannot start 200 interpreters in time.
PROCESSES = 6

#: Runs ``loopbot decide ID approve --as VOTER`` for each [id, voter] of argv[2], all at once; prints the codes.
DECIDER = """
import json, sys
from concurrent.futures import ThreadPoolExecutor
from bot.cli import main
config, jobs = sys.argv[1], json.loads(sys.argv[2])
def decide(job):
    return main(["decide", job[0], "approve", "--as", job[1], "--config", config])
with ThreadPoolExecutor(len(jobs)) as pool:
    codes = list(pool.map(decide, jobs))
print("CODES " + json.dumps(codes))
"""


def loop() -> dict[str, Any]:
    """The loop the bots serve: runs may overlap, each review needs all of ``VOTERS``."""
    return demo_loop(overlap="allow", review={"reviewers": {"local": VOTERS}, "approvals_required": len(VOTERS)})


def two_hundred_decides_lose_none_and_double_none(store: Store, spaces: Sequence[Workspace], *,
                                                  timeout: float) -> None:
    """Starts 50 runs through ``store``, votes on their reviews from ``PROCESSES`` processes, each on the config
    of ``spaces[k % len(spaces)]``, and checks every vote counted once and every review applied once.

    ``timeout`` bounds each wait (the decides' processes get twice as long).
    """
    for _ in range(DECIDES // len(VOTERS)):
        store.enqueue_request("run", {"loop": "demo", "trigger": "cli"})
    reviews = wait_for(lambda: len(found := store.open_reviews()) == 50 and found, timeout=timeout,
                       what="50 open reviews")
    jobs = [(review.id, voter) for review in reviews for voter in VOTERS]
    assert len(jobs) == DECIDES
    procs = []
    for k in range(PROCESSES):  # each process runs its share at once, through the CLI's main in threads
        space = spaces[k % len(spaces)]
        procs.append(subprocess.Popen([sys.executable, "-c", DECIDER, str(space.config_path),
                                       json.dumps(jobs[k::PROCESSES])], env=space.env, cwd=space.root,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    codes = []
    for proc in procs:
        out, err = proc.communicate(timeout=2 * timeout)
        assert proc.returncode == 0, err
        codes += json.loads(next(ln for ln in out.splitlines() if ln.startswith("CODES "))[6:])
    assert codes == [0] * DECIDES

    def settled() -> bool:
        return all(store.get_run(r.run_id).status == "completed" for r in reviews)

    wait_for(settled, timeout=timeout, what="all 50 runs completed")
    everyone = [f"local:{v}" for v in VOTERS]
    for review in reviews:
        final = store.get_review(review.id)
        assert final.status == "applied"
        assert sorted(v.voter for v in final.history) == everyone  # none lost, none doubled
        assert final.outcome is not None and sorted(final.outcome.decided_by) == everyone
        state = store.load_state(review.run_id)
        assert state is not None and len(state.decisions) == 1  # applied once
    assert store.counts()["decided_reviews"] == 0
