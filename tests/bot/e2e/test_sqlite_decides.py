"""One ``loopbot serve`` on SQLite while ``loopbot decide`` runs in other processes: 200 at once lose none.

Every decide opens loopbot.db for itself (its own writer connection) and
writes while serve writes too - applying outcomes, posting, saving
snapshots; BEGIN IMMEDIATE serialises them. Each of the 200 votes is stored
exactly once, every review is applied exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bot.store import SqliteStore

from .conftest import Workspace, demo_loop, wait_for

pytestmark = pytest.mark.e2e

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


def test_two_hundred_concurrent_decides_while_serve_writes_lose_none_and_double_none(ws: Workspace) -> None:
    voters = ["v1", "v2", "v3", "v4"]
    ws.write_config([demo_loop(overlap="allow", review={"reviewers": {"local": voters}, "approvals_required": 4})])
    ws.serve()
    store = SqliteStore(ws.state_dir)
    for _ in range(50):
        store.enqueue_request("run", {"loop": "demo", "trigger": "cli"})
    reviews = wait_for(lambda: len(found := store.open_reviews()) == 50 and found, timeout=60, what="50 open reviews")
    jobs = [(review.id, voter) for review in reviews for voter in voters]
    assert len(jobs) == 200
    # six processes (two CPUs here cannot start 200 interpreters in time), each running its share at once
    shares = [jobs[k::6] for k in range(6)]
    procs = [subprocess.Popen([sys.executable, "-c", DECIDER, str(ws.config_path), json.dumps(share)],
                              env=ws.env, cwd=ws.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for share in shares]
    codes = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        codes += json.loads(next(ln for ln in out.splitlines() if ln.startswith("CODES "))[6:])
    assert codes == [0] * 200

    def settled() -> bool:
        return all(store.get_run(r.run_id).status == "completed" for r in reviews)

    wait_for(settled, timeout=60, what="all 50 runs completed")
    for review in reviews:
        final = store.get_review(review.id)
        assert final.status == "applied"
        assert sorted(v.voter for v in final.history) == [f"local:{v}" for v in voters]  # none lost, none doubled
        state = store.load_state(review.run_id)
        assert state is not None and len(state.decisions) == 1  # applied once
    assert store.counts()["decided_reviews"] == 0
