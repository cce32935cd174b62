"""``bot.replicas``: what only the leader does (``Leadership``) and the replicas' view for /healthz and status.

Each replica is a ``Leadership`` on a PostgresStore of its own (its own
owner name) over one throwaway schema, in this process. Elections are driven
round by round (``election.round()``) where the order matters; where they
run on their threads, the tests poll with a deadline.

Most tests give ``Leadership`` a stand-in runner that records
``recover`` calls - the only thing Leadership asks of a runner. One test
uses the real ``Runner`` to show the leader continues a run a dead replica
left "running", and leaves one that another replica still holds; another
that a run whose claim's session is cut while its replica lives on is not
taken from it (the replica claims it again), so no step runs twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest

from bot.config import BotConfig, load_config
from bot.desk import ReviewDesk
from bot.replicas import Leadership, replicas_view
from bot.runner import Runner
from bot.scheduler import LoopScheduler
from bot.store.base import RunRecord
from bot.store.sql import PostgresStore
from bot.leader import LeaderElection, replicas
from bot.store.sql_schema import advisory_key

from .runtime_support import T0, FakeClock, RecordingChannel, demo, wait_for, write_config
from .slow_loop import trail_lines

#: The generous bound for "another replica takes over within about one election interval".
TAKEOVER_BOUND = 2.5


class RecordingRunner:
    """Stands in for the Runner: Leadership only asks it to ``recover`` (when elected, then each sweep)."""

    def __init__(self) -> None:
        self.recovered: list[bool] = []  # the ``post`` of each call

    def recover(self, *, post: bool = True) -> None:
        self.recovered.append(post)






@pytest.fixture
def config(tmp_path: Path) -> BotConfig:
    """One scheduled loop (every hour: it never fires during a test)."""
    return load_config(write_config(tmp_path, [demo(schedule={"interval": "1h"})]), environ={})




@pytest.fixture
def fired() -> list[str]:
    return []


@pytest.fixture
def leaderships(config: BotConfig, stores: Callable[[str], PostgresStore],
                fired: list[str]) -> Iterator[Callable[..., tuple[Leadership, RecordingRunner]]]:
    """Makes a replica's Leadership with a recording runner; every one is stopped at the end."""
    made: list[Leadership] = []

    def make(name: str, *, interval: float = 60.0, info: dict[str, Any] | None = None,
             runner: Any = None) -> tuple[Leadership, Any]:
        runner = runner if runner is not None else RecordingRunner()
        leadership = Leadership(config, stores(name), cast(Runner, runner), fired.append, interval=interval,
                                info=info)
        made.append(leadership)
        return leadership, runner

    yield make
    for leadership in made:
        leadership.stop()


def _kill_leader_session(url: str, schema: str) -> None:
    """Terminate the session holding the schema's leader lock (a leader cut off), waiting until it is gone."""
    import psycopg

    key = advisory_key(schema, "leader") & 0xFFFF_FFFF_FFFF_FFFF
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
            " AND classid::bigint = %s AND objid::bigint = %s", (key >> 32, key & 0xFFFF_FFFF)).fetchall()]
        assert len(pids) == 1, f"expected one leader session, found {pids}"
        assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pids[0],)).fetchone() == (True,)


# -- replicas_view -------------------------------------------------------------------------------------


def test_the_view_of_a_schema_no_replica_has_beaten_has_no_leader(stores: Callable[[str], PostgresStore]) -> None:
    store = stores("observer")
    assert replicas_view(store) == {"leader": None, "replicas": []}
    assert replicas_view(store, "me") == {"leader": None, "replicas": [], "replica": "me"}


def test_the_view_names_the_leader_lists_every_replica_leader_first_and_says_which_one_asks(
        stores: Callable[[str], PostgresStore]) -> None:
    observer = stores("observer")
    c = LeaderElection(stores("c"), info={"pid": 3, "port": 8003})
    a = LeaderElection(stores("a"))
    b = LeaderElection(stores("b"), info={"pid": 2})
    try:
        assert c.round() and not a.round() and not b.round()
        view = replicas_view(observer, "b")
        assert set(view) == {"leader", "replicas", "replica"}
        assert view["leader"] == "c" and view["replica"] == "b"
        assert [(r["name"], r["leader"]) for r in view["replicas"]] == [("c", True), ("a", False), ("b", False)]
        assert view["replicas"] == [r.to_dict() for r in replicas(observer)]
        shown = {r["name"]: r for r in view["replicas"]}
        assert set(shown["c"]) == {"name", "leader", "heartbeat", "started_at", "info"}
        assert shown["c"]["info"] == {"pid": 3, "port": 8003} and shown["b"]["info"] == {"pid": 2}
        assert "info" not in shown["a"]  # no info given, none shown
        for replica in view["replicas"]:
            heartbeat = datetime.fromisoformat(replica["heartbeat"])
            assert heartbeat.tzinfo is not None and datetime.fromisoformat(replica["started_at"]) <= heartbeat
        assert json.loads(json.dumps(view)) == view  # /healthz sends it as it is
        assert "replica" not in replicas_view(observer)  # ``status`` asks as nobody

        c.stop()  # a stopped leader is listed, not leading; until another wins there is no leader
        assert replicas_view(observer)["leader"] is None
        assert [r["name"] for r in replicas_view(observer)["replicas"]] == ["a", "b", "c"]
        assert b.round()
        assert replicas_view(observer)["leader"] == "b"
    finally:
        for election in (a, b, c):
            election.stop()


# -- Leadership ---------------------------------------------------------------------------------------


def test_the_replica_that_leads_from_the_start_runs_the_scheduler_and_recovers_the_others_do_not(
        leaderships: Callable[..., tuple[Leadership, RecordingRunner]], stores: Callable[[str], PostgresStore]) -> None:
    a, a_runner = leaderships("a", info={"pid": 1})
    b, b_runner = leaderships("b")
    assert a.name == "a" and b.name == "b"
    assert not a.leading and not a.scheduler.running  # nothing before start

    assert a.start() is True
    assert a.leading and a.scheduler.running
    assert list(a.scheduler.next_run_times()) == ["demo"]
    assert a_runner.recovered == [True]  # interrupted runs restarted (and unposted reviews posted) once

    assert b.start() is False
    assert not b.leading and not b.scheduler.running and b_runner.recovered == []
    b.sweep()
    assert b_runner.recovered == [] and not b.scheduler.running  # a replica that does not lead never sweeps
    view = replicas_view(stores("observer"), b.name)
    assert (view["leader"], view["replica"]) == ("a", "b")


def test_when_the_leader_stops_another_takes_over_its_duties_within_an_interval(
        leaderships: Callable[..., tuple[Leadership, RecordingRunner]]) -> None:
    interval = 0.2
    a, a_runner = leaderships("a", interval=interval)
    b, b_runner = leaderships("b", interval=interval)
    assert a.start() and not b.start()
    next_run = a.scheduler.next_run_times()["demo"]

    stopped = time.monotonic()
    a.stop()
    assert not a.leading and not a.scheduler.running
    # elected: the scheduler starts, then the recovery runs (on b's election thread)
    wait_for(lambda: b.leading and b.scheduler.running and b_runner.recovered, timeout=10,
             what="b to lead, run the scheduler and recover")
    took = time.monotonic() - stopped
    assert took < TAKEOVER_BOUND, f"b took over after {took:.2f}s (interval {interval}s)"
    assert b_runner.recovered == [True]
    # the job store is shared: the new leader keeps the next run time the old one left
    assert b.scheduler.next_run_times() == {"demo": next_run}
    assert a_runner.recovered == [True] and not a.leading


def test_a_leader_whose_session_is_killed_stops_its_duties_and_the_next_leader_takes_them(
        url: str, schema: str, leaderships: Callable[..., tuple[Leadership, RecordingRunner]]) -> None:
    a, a_runner = leaderships("a")
    b, b_runner = leaderships("b")
    assert a.election.round() and not b.election.round()  # rounds driven here: no threads
    assert a.leading and a.scheduler.running and a_runner.recovered == [True]

    _kill_leader_session(url, schema)
    assert not a.election.round()  # it notices at its next round and steps down at once
    assert not a.leading and not a.scheduler.running
    assert b.election.round()
    assert b.leading and b.scheduler.running and b_runner.recovered == [True]
    assert not a.election.round() and not a.scheduler.running
    assert a_runner.recovered == [True]  # the stepped-down replica recovers nothing more


def test_the_sweep_waits_an_interval_after_the_election(
        leaderships: Callable[..., tuple[Leadership, RecordingRunner]]) -> None:
    a, runner = leaderships("a", interval=60.0)
    assert a.election.round()
    a.sweep()
    a.sweep()
    assert runner.recovered == [True]  # recovered when elected; the sweep waits a whole interval


def test_the_leaders_sweep_retries_a_scheduler_that_could_not_start_and_recovers_left_runs_once_per_interval(
        config: BotConfig, tmp_path: Path, leaderships: Callable[..., tuple[Leadership, RecordingRunner]]) -> None:
    interval = 0.5
    a, runner = leaderships("a", interval=interval)
    # Another scheduler holds this process's one slot, so the scheduler cannot start at the election.
    other = LoopScheduler(config, tmp_path / "other", lambda name: None)
    other.start()
    try:
        assert a.election.round()
        assert a.leading and not a.scheduler.running
        assert runner.recovered == [True]  # the recovery does not depend on the scheduler
    finally:
        other.stop()

    def swept() -> bool:
        a.sweep()
        return len(runner.recovered) > 1

    wait_for(swept, timeout=5, what="the leader's sweep")
    assert runner.recovered == [True, False]  # only runs left "running": post=False
    assert a.scheduler.running  # retried by the sweep
    a.sweep()
    assert runner.recovered == [True, False]  # once per interval, however often the tick calls it


def test_a_stopped_leadership_gives_up_its_duties_and_stays_stopped(
        leaderships: Callable[..., tuple[Leadership, RecordingRunner]], stores: Callable[[str], PostgresStore]) -> None:
    a, runner = leaderships("a", interval=0.2)
    assert a.start()
    a.stop()
    assert not a.leading and not a.scheduler.running
    assert not a.election.leading
    a.sweep()
    assert runner.recovered == [True]
    assert replicas_view(stores("observer"))["leader"] is None
    a.stop()  # twice is harmless


def test_with_the_real_runner_the_leader_continues_a_run_a_dead_replica_left_but_not_one_still_held(
        config: BotConfig, stores: Callable[[str], PostgresStore],
        leaderships: Callable[..., tuple[Leadership, Any]]) -> None:
    store = stores("a")
    channel = RecordingChannel()
    clock = FakeClock()
    runner = Runner(config, store, ReviewDesk(store, {"local": channel}, clock=clock, inline=True), clock=clock)
    for run_id in ("demo-run-1", "demo-run-2"):  # both left "running" with no snapshot: started over
        store.put_run(RunRecord(id=run_id, loop="demo", status="running", created_at=T0, updated_at=T0,
                                trigger="schedule"))
    held = stores("b").claim_run("demo-run-2")  # replica b is alive and still executing demo-run-2
    assert held is not None
    try:
        leader, _ = leaderships("leader", interval=0.3, runner=runner)
        assert leader.election.round()
        assert runner.join(10)
        assert store.get_run("demo-run-1").status == "waiting"  # continued: it ran up to its review
        assert store.get_run("demo-run-2").status == "running"  # left to the replica that holds it
        assert [kind for kind, _, _ in channel.calls] == ["post"]

        held.release()  # b stopped or died: the next sweep takes the run over

        def swept() -> bool:
            leader.sweep()
            return runner.join(10) and store.get_run("demo-run-2").status == "waiting"

        wait_for(swept, timeout=10, what="the sweep to continue demo-run-2")
        assert [kind for kind, _, _ in channel.calls] == ["post", "post"]
    finally:
        held.release()
        runner.shutdown(5)


def test_the_leaders_sweep_reads_only_runs_left_running_not_every_waiting_runs_document(
        config: BotConfig, url: str, schema: str, stores: Callable[[str], PostgresStore]) -> None:
    """The sweep comes every election interval on an idle bot: a cost per waiting run (one per open review)
    would grow with the stored documents. A waiting run's document it read would be listed by problems()."""
    import psycopg

    store = stores("leader")
    channel = RecordingChannel()
    clock = FakeClock()
    runner = Runner(config, store, ReviewDesk(store, {"local": channel}, clock=clock, inline=True), clock=clock)
    store.put_run(RunRecord(id="demo-run-1", loop="demo", status="running", created_at=T0, updated_at=T0,
                            trigger="schedule"))  # left by a replica that died
    store.put_run(RunRecord(id="demo-run-2", loop="demo", status="waiting", created_at=T0, updated_at=T0,
                            trigger="schedule", review_id="demo-7"))
    with psycopg.connect(url, autocommit=True) as conn:  # a document nothing but a read of it would notice
        conn.execute(f"UPDATE {schema}.runs SET doc = '{{damaged' WHERE id = 'demo-run-2'")
    try:
        runner.recover(post=False)
        assert runner.join(10)
        assert store.get_run("demo-run-1").status == "waiting"  # continued up to its review
        assert store.problems() == []  # the waiting run's document was not read
    finally:
        runner.shutdown(5)


def _slow_runners(tmp_path: Path, *stores: PostgresStore) -> tuple[Path, list[Runner]]:
    """A two-step slow loop (0.75 s a step, each leaving a trail line) and one Runner per replica's store."""
    trail = tmp_path / "trail"
    slow = {"name": "slow", "factory": "tests.bot.slow_loop:build",
            "options": {"steps": 2, "delay": 0.75, "trail": str(trail)}}
    (tmp_path / "replicas").mkdir()
    config = load_config(write_config(tmp_path / "replicas", [slow]), environ={})

    def runner(store: PostgresStore) -> Runner:
        clock = FakeClock()
        return Runner(config, store, ReviewDesk(store, {"local": RecordingChannel()}, clock=clock, inline=True),
                      clock=clock)

    return trail, [runner(store) for store in stores]


def _cut_claim_session(url: str, schema: str, run_id: str) -> None:
    """Terminate the database session holding ``run_id``'s claim while its process lives on."""
    import psycopg

    key = advisory_key(schema, f"run:{run_id}") & 0xFFFF_FFFF_FFFF_FFFF
    with psycopg.connect(url, autocommit=True) as conn:
        [(pid,)] = conn.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                                " AND classid::bigint = %s AND objid::bigint = %s",
                                (key >> 32, key & 0xFFFF_FFFF)).fetchall()
        assert conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone() == (True,)


def test_a_run_whose_claim_session_is_cut_while_its_replica_lives_is_not_executed_twice(
        url: str, schema: str, tmp_path: Path, stores: Callable[[str], PostgresStore],
        leaderships: Callable[..., tuple[Leadership, Any]], caplog: pytest.LogCaptureFixture) -> None:
    follower_store, leader_store = stores("follower"), stores("leader")
    trail, (follower, leader_runner) = _slow_runners(tmp_path, follower_store, leader_store)
    interval = 0.2
    leader, _ = leaderships("leader", interval=interval, runner=leader_runner)
    alive = LeaderElection(stores("follower"), interval=interval)  # the follower replica's own election: it lives
    try:
        assert leader.election.round()  # the leader is elected first: nothing to recover yet
        assert not alive.round()
        elected = time.monotonic()
        run_id = follower.request_run("slow", trigger="cli")  # the other replica starts a run and holds its claim
        assert run_id is not None
        wait_for(lambda: trail_lines(trail), timeout=5, what="the run's first step to start")
        _cut_claim_session(url, schema, run_id)  # the follower lives on
        wait_for(lambda: time.monotonic() - elected > interval, timeout=5, what="an election interval")
        leader.sweep()  # the leader's periodic sweep, as every tick calls it
        assert follower.join(10) and leader_runner.join(10)
        assert "claimed again" in caplog.text  # by the follower, at its next write
    finally:
        follower.shutdown(5)
        leader_runner.shutdown(5)
        alive.stop()

    assert follower_store.get_run(run_id).status == "completed"
    lines = trail_lines(trail)
    # one execution: each step starts, then ends, before the next starts - never two run threads at once
    assert [line.split()[:2] for line in lines] == [["start", "step_1"], ["done", "step_1"],
                                                   ["start", "step_2"], ["done", "step_2"]], lines


def test_a_run_taken_over_while_its_old_thread_still_runs_gets_no_further_write_from_that_thread(
        url: str, schema: str, tmp_path: Path, stores: Callable[[str], PostgresStore],
        leaderships: Callable[..., tuple[Leadership, Any]], caplog: pytest.LogCaptureFixture) -> None:
    """Fencing: the follower looked gone (no liveness lock), so the leader took the run; its old run thread
    finds its claim lost before its next write and stops there - it never runs the next step."""
    follower_store, leader_store = stores("follower"), stores("leader")
    trail, (follower, leader_runner) = _slow_runners(tmp_path, follower_store, leader_store)
    leader, _ = leaderships("leader", interval=0.2, runner=leader_runner)
    try:
        assert leader.election.round()
        run_id = follower.request_run("slow", trigger="cli")  # no election of its own: nothing says it lives
        assert run_id is not None
        wait_for(lambda: trail_lines(trail), timeout=5, what="the run's first step to start")
        _cut_claim_session(url, schema, run_id)
        leader_runner.recover(post=False)  # the leader's sweep: the run is the leader's now
        assert follower.join(10) and leader_runner.join(10)
    finally:
        follower.shutdown(5)
        leader_runner.shutdown(5)

    assert "could not be claimed again" in caplog.text and "lost its claim" in caplog.text
    steps = [line.split()[:2] for line in trail_lines(trail)]
    assert steps.count(["start", "step_2"]) == 1, steps  # the old run thread stopped before the next step
    assert leader_store.get_run(run_id).status == "completed"
