"""The dashboard's failing deliveries come from the store's ``failing_tasks``: only those, the oldest, bounded.

A large outbox backlog of tasks not tried yet (a channel down for an hour,
a burst of posts) must not be read to find the few that fail: the database
picks the failing ones and counts them, and the page says how many more
there are than it shows.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bot.store.base import OutboxTask, Store
from bot.store.engines import sqlite_time
from bot.store.sql import PostgresStore, SqliteStore
from bot.web.views import PER_PAGE

from ..runtime_support import T0
from ..store import pg_cluster
from .support import bearer, site

#: Pending tasks not tried yet, the backlog the dashboard must not read.
BACKLOG = 5_000


def task(n: int, attempts: int = 0, channel: str = "slack") -> OutboxTask:
    return OutboxTask(id=f"demo-{n}.post.{channel}-c{n}", channel=channel, action="post", review_id=f"demo-{n}",
                      payload={"target": {"slack": {"channel": f"C{n:05d}"}}}, created_at=T0 + timedelta(seconds=n),
                      attempts=attempts, last_error=f"failure {n}" if attempts else None)


def fill(store: Store, backlog: int, failing: list[int]) -> None:
    for n in range(backlog):
        store.add_task(task(n, attempts=3 if n in failing else 0))


STORES: dict[str, Callable[[Path], Store]] = {
    "sqlite": lambda root: SqliteStore(root / "state"),
    "postgres": lambda root: PostgresStore(pg_cluster.url(), schema=pg_cluster.schema_for(root)),
}


@pytest.mark.parametrize("engine", sorted(STORES))
def test_failing_tasks_are_the_oldest_failing_ones_bounded_with_a_count_of_all(engine: str, tmp_path: Path) -> None:
    store = STORES[engine](tmp_path)
    fill(store, 40, failing=[31, 5, 17, 23])
    assert store.failing_tasks(0) == ([], 4)
    tasks, total = store.failing_tasks(3)
    assert [t.id for t in tasks] == [task(n).id for n in (5, 17, 23)] and total == 4
    assert tasks[0].attempts == 3 and tasks[0].last_error == "failure 5"
    store.update_task(task(5).id, lambda t: setattr(t, "attempts", 0))  # a retry that got through resets it
    store.finish_tasks([task(17).id])  # delivered: no longer pending
    assert [t.id for t in store.failing_tasks(10)[0]] == [task(23).id, task(31).id]
    assert store.failing_tasks(10)[1] == 2


def test_the_dashboard_lists_the_3_failing_of_5000_pending_and_reads_none_of_the_others(tmp_path: Path) -> None:
    """A damaged task among the ones not tried yet shows whether the page read them: decoding it would list
    it among the store's problems."""
    s = site(tmp_path)
    fill(s.store, BACKLOG, failing=[10, 2500, 4999])
    damaged = {"format": 1, "id": "demo-x.post.slack-cx", "attempts": 0}  # no channel, action, payload
    with sqlite3.connect(Path(s.config.state_dir) / "loopbot.db") as db:
        db.execute("INSERT INTO outbox (id, channel, review_id, created_at, ready_at, doc) VALUES (?, ?, ?, ?, ?, ?)",
                   (damaged["id"], "slack", None, sqlite_time(T0), sqlite_time(T0), json.dumps(damaged)))
    db.close()
    page = TestClient(s.app).get("/", headers=bearer()).text
    failing = page.split('id="failing"')[1]
    assert "Deliveries that keep failing (3)" in page
    assert re.findall(r"slack:(C\d{5})", failing) == ["C00010", "C02500", "C04999"]
    assert "more are failing" not in failing
    assert s.store.problems() == []  # the 5,001 not failing were left in the database
    assert len(s.store.pending_tasks()) == BACKLOG  # the guard can fail: a listing that reads them finds it
    assert [p.split(":")[0] for p in s.store.problems()] == ["outbox/demo-x.post.slack-cx"]


def test_past_a_page_of_failing_deliveries_the_dashboard_counts_them_all_and_says_how_many_more(
    tmp_path: Path,
) -> None:
    s = site(tmp_path)
    fill(s.store, PER_PAGE + 300, failing=list(range(100, 100 + PER_PAGE + 7)))
    page = TestClient(s.app).get("/", headers=bearer()).text
    failing = page.split('id="failing"')[1]
    assert f"Deliveries that keep failing ({PER_PAGE + 7})" in page
    shown = re.findall(r"slack:(C\d{5})", failing)
    assert shown == [f"C{n:05d}" for n in range(100, 100 + PER_PAGE)]  # the oldest
    assert f"The oldest {PER_PAGE} are shown; 7 more are failing." in failing
