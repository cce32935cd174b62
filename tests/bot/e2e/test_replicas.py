"""Three ``loopbot serve`` replicas on one PostgreSQL database.

Each replica has its own config file and state dir (its serve lock, its
local files) and the same ``store:`` block. Votes sent to different
replicas are counted once each and applied once; a leader killed with -9
during a scheduled run is replaced and the run continues from its snapshot;
a replica killed mid-claim leaves its work to another, done once; 200
concurrent ``loopbot decide`` lose none and double none.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.channel import EVENT_REVIEW
from bot.store.sql import PostgresStore
from tests.bot.slow_loop import trail_lines
from tests.fakes.slack_api import FakeSlackApi

from ..store import pg_cluster
from . import concurrent_decides
from .conftest import Bot, Workspace, demo_loop, slow_loop, wait_for
from .slack_support import BOT_TOKEN, CHANNEL, SECRET, SlackDesk

pytestmark = pytest.mark.e2e

USERS = ("U0AAA", "U0BBB", "U0CCC")

class Replicas:
    """Three workspaces (config + state dir each) on one database schema; ``bots[i]`` serves workspace i."""

    def __init__(self, root: Path) -> None:
        self.url = pg_cluster.url()
        self.schema = pg_cluster.schema_for(root)
        self.spaces = [Workspace(root / f"r{i}") for i in range(3)]
        for space in self.spaces:
            space.root.mkdir()
            for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
                space.env.pop(name, None)
        self.bots: list[Bot] = []

    def configure(self, loops: list[dict[str, Any]], **top: Any) -> None:
        store = {"url": self.url, "schema": self.schema, "lease_seconds": 3, "election_interval": 0.3}
        for space in self.spaces:
            space.write_config(loops, store=store, **top)

    def start(self) -> list[Bot]:
        """Replica 0 first (it leads from the start), then the other two."""
        self.bots = [self.spaces[0].serve()]
        self.bots += [space.serve() for space in self.spaces[1:]]
        return self.bots

    @property
    def ws(self) -> Workspace:
        return self.spaces[0]

    def live(self) -> list[Bot]:
        return [b for b in self.bots if b.proc is not None and b.proc.poll() is None]

    def leader_pid(self, asked: Bot | None = None) -> int | None:
        """The pid of the replica /healthz names as leader (asking ``asked`` or the first live one)."""
        body = (asked or self.live()[0]).healthz().json()
        lead = next((r for r in body.get("replicas", []) if r["leader"]), None)
        return None if lead is None else int(lead["info"]["pid"])

    def bot_of(self, pid: int) -> Bot:
        return next(b for b in self.bots if b.proc is not None and b.proc.pid == pid)

    def store(self) -> PostgresStore:
        return PostgresStore(self.url, schema=self.schema, owner="test")

    def close(self) -> None:
        for space in self.spaces:
            for bot in space.bots:
                bot.close()


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Replicas]:
    group = Replicas(tmp_path)
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def fake() -> Iterator[FakeSlackApi]:
    with FakeSlackApi() as api:
        yield api


def _slack(fake: FakeSlackApi) -> dict[str, Any]:
    return {"bot_token": BOT_TOKEN, "api_base_url": fake.base_url, "signing_secret": SECRET}


def _slack_demo(approvals: int, users: tuple[str, ...] = USERS, **extra: Any) -> dict[str, Any]:
    return demo_loop(review={"post_to": [{"slack": {"channel": CHANNEL}}], "reviewers": {"slack_users": list(users)},
                             "approvals_required": approvals}, **extra)


def test_votes_sent_to_different_replicas_count_once_each_and_apply_once(
    replicas: Replicas, fake: FakeSlackApi
) -> None:
    replicas.configure([_slack_demo(2, run_on_start=True)], slack=_slack(fake))
    bots = replicas.start()
    body = bots[2].healthz().json()
    assert body["leader"] and len(body["replicas"]) == 3 and body["replica"] != body["leader"]
    assert replicas.leader_pid(bots[2]) == bots[0].proc.pid  # type: ignore[union-attr]
    review = replicas.ws.wait_open_review()
    rid = review["id"]
    desk = SlackDesk(replicas.ws, fake)
    desk.posted_review(rid)
    try:
        def vote(args: tuple[int, str]) -> str:
            index, user = args
            desk.bot = bots[index]
            return str(desk.send(desk.slash_body(f"approve {rid}", user=user)).json()["text"])

        # the same person twice (replicas 0 and 2) and a second person (replica 1), all at once
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(vote, [(0, "U0AAA"), (1, "U0BBB"), (2, "U0AAA")]))
    finally:
        desk.close()
    assert answers, answers
    replicas.ws.wait_run(review["run"], "completed", timeout=20)
    shown = replicas.ws.review(rid)
    assert shown is not None and shown["status"] == "applied"
    assert sorted(shown["outcome"]["decided_by"]) == ["slack:U0AAA", "slack:U0BBB"]
    assert sorted(v["voter"] for v in shown["votes"]) == ["slack:U0AAA", "slack:U0BBB"]
    # applied once: each note in the thread (outcome, votes as cast, the run's end) once
    updates = wait_for(lambda: (u := desk.updates(rid)) and any("completed" in t for t in u) and u,
                       timeout=15, what="the run's end in the thread")
    assert len(updates) == len(set(updates)), updates
    assert len(desk.tagged(EVENT_REVIEW, review_id=rid)) == 1  # posted once, though three replicas deliver
    status = replicas.ws.status()
    assert status["leader"] and {r["name"] for r in status["replicas"]} == set(
        r["name"] for r in body["replicas"])


def test_leader_killed_during_a_scheduled_run_is_replaced_and_the_run_continues(
    replicas: Replicas, tmp_path: Path
) -> None:
    trail = tmp_path / "trail.txt"
    loop = slow_loop(trail, steps=4, delay=0.8)
    loop.update(run_on_start=False, schedule={"interval": "2s"})
    replicas.configure([loop])
    bots = replicas.start()
    leader = replicas.bot_of(replicas.leader_pid() or 0)
    assert leader is bots[0]
    # step 3 started: step 2's end is saved (the engine saves at the boundary, then starts the next step);
    # "done step_2" alone comes before that save, and a kill between the two rightly does step 2 again
    wait_for(lambda: f"start step_3 {leader.proc.pid}" in trail_lines(trail),  # type: ignore[union-attr]
             timeout=20, what="the scheduled run's third step on the leader")
    leader.kill9()  # at once: a `status` first takes seconds on busy cores, and step 3 only 0.8 s
    killed = time.monotonic()
    run = next(r for r in replicas.ws.status()["runs"] if r["loop"] == "slow")
    assert run["trigger"] == "schedule"
    new = wait_for(lambda: (pid := replicas.leader_pid()) not in (None, leader.proc.pid) and pid,  # type: ignore
                   timeout=30, what="another replica to lead")
    assert time.monotonic() - killed < 30
    replicas.ws.wait_run(run["id"], "completed", timeout=20)
    lines = trail_lines(trail)
    end = [i for i, line in enumerate(lines) if line.startswith("done step_4")][0]
    done = [line.split()[1] for line in lines[: end + 1] if line.startswith("done")]
    assert done == ["step_1", "step_2", "step_3", "step_4"]  # from its snapshot: steps 1-2 not done again
    # a surviving replica finished it: the new leader, or one that led after it (on busy cores a lease can
    # pass on again before step 4), never the killed one
    survivors = {str(b.proc.pid) for b in replicas.live() if b.proc is not None}
    assert str(new) in survivors
    assert all(line.split()[2] in survivors for line in lines[: end + 1] if line.startswith("done step_4"))


def test_a_replica_killed_mid_claim_leaves_the_work_to_another_done_once(
    replicas: Replicas, tmp_path: Path
) -> None:
    trail = tmp_path / "trail.txt"
    replicas.configure([slow_loop(trail, steps=3, delay=1.5, review_after=1)])
    replicas.start()
    review = replicas.ws.wait_open_review("slow", timeout=20)
    decided = replicas.ws.cli("decide", review["id"], "approve")
    assert decided.returncode == 0, decided.stderr
    # whichever replica claimed the decided review resumes the run: kill it in the middle of step 2
    line = wait_for(lambda: next((ln for ln in trail_lines(trail) if ln.startswith("start step_2")), None),
                    timeout=20, what="step 2 to start")
    holder = replicas.bot_of(int(line.split()[2]))
    holder.kill9()
    replicas.ws.wait_run(review["run"], "completed", timeout=30)
    done = collections.Counter(ln.split()[1] for ln in trail_lines(trail) if ln.startswith("done"))
    assert done == {"step_1": 1, "step_2": 1, "step_3": 1}
    assert all(not ln.endswith(f" {holder.proc.pid}") for ln in trail_lines(trail)  # type: ignore[union-attr]
               if ln.startswith("done step_2"))
    shown = replicas.ws.review(review["id"])
    assert shown is not None and shown["status"] == "applied" and len(shown["history"]) == 1


def test_two_hundred_concurrent_decides_over_the_replicas_lose_none_and_double_none(replicas: Replicas) -> None:
    """A third of the decides on each replica's config (concurrent_decides.py, SQLite's check too)."""
    replicas.configure([concurrent_decides.loop()])
    replicas.start()
    store = replicas.store()
    try:
        concurrent_decides.two_hundred_decides_lose_none_and_double_none(store, replicas.spaces, timeout=30)
    finally:
        store.close()
