"""Leader election among replicas (advisory lock on its own connection), heartbeats, the scheduler's job store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.store.sql import PostgresStore
from bot.leader import LeaderElection, replicas, scheduler_url

from . import pg_cluster

ROOT = Path(__file__).resolve().parents[3]


def _store(tmp_path: Path, owner: str) -> PostgresStore:
    return PostgresStore(pg_cluster.url(), schema=pg_cluster.schema_for(tmp_path), owner=owner)


def test_one_replica_leads_and_another_takes_over_when_it_stops(tmp_path: Path) -> None:
    events: list[str] = []
    a = LeaderElection(_store(tmp_path, "a"), on_elected=lambda: events.append("a leads"))
    b = LeaderElection(_store(tmp_path, "b"), on_elected=lambda: events.append("b leads"),
                       on_demoted=lambda: events.append("b steps down"))
    assert a.round() and not b.round() and a.round() and not b.round()
    shown = replicas(a.store)
    assert [(r.name, r.leader) for r in shown] == [("a", True), ("b", False)]
    assert shown[0].heartbeat <= shown[1].heartbeat
    a.stop()
    assert b.round() and events == ["a leads", "b leads"]
    assert [(r.name, r.leader) for r in replicas(b.store)] == [("b", True), ("a", False)]
    b._conn.close()  # b's session is lost: it steps down, then competes again
    assert b.round() and events[-2:] == ["b steps down", "b leads"]  # it stepped down, then won on a new session
    b.stop()


CHILD = """
import sys, time
from bot.store.sql import PostgresStore
from bot.leader import LeaderElection
store = PostgresStore(sys.argv[1], schema=sys.argv[2], owner="child")
election = LeaderElection(store, interval=0.2, on_elected=lambda: print("leading", flush=True))
election.start()
time.sleep(600)
"""


def test_a_leader_killed_with_sigkill_is_replaced_within_seconds(tmp_path: Path) -> None:
    schema = pg_cluster.schema_for(tmp_path)
    _store(tmp_path, "parent")  # migrated before the child starts
    child = subprocess.Popen([sys.executable, "-c", CHILD, pg_cluster.url(), schema], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "leading"
        parent = LeaderElection(_store(tmp_path, "parent"))
        assert not parent.round()
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        killed = time.monotonic()
        while not parent.round():
            assert time.monotonic() - killed < 30, "no new leader within 30 s"
            time.sleep(0.1)
        assert time.monotonic() - killed < 5
        parent.stop()
    finally:
        if child.poll() is None:
            child.kill()


def job() -> None:  # the scheduler's jobs are importable module-level functions
    pass


def test_the_scheduler_job_store_lives_on_the_same_database(tmp_path: Path) -> None:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    url = scheduler_url(pg_cluster.url())
    assert url.startswith("postgresql+psycopg://")
    schema = pg_cluster.schema_for(tmp_path)
    _store(tmp_path, "x")
    scheduler = BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=url, tableschema=schema)})
    scheduler.start(paused=True)
    try:
        scheduler.add_job(job, "interval", minutes=5, id="loop:demo", replace_existing=True)
        scheduler.add_job(job, "interval", minutes=5, id="loop:demo", replace_existing=True)
        assert [j.id for j in scheduler.get_jobs()] == ["loop:demo"]
    finally:
        scheduler.shutdown(wait=False)
