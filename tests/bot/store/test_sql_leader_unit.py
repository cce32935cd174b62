"""Focused tests of replica coordination on PostgreSQL: run claims, leader election, heartbeats.

``claim_run`` (and ``PostgresStore.claim_run``) holds an advisory lock on a
session of its own; ``LeaderElection`` competes for the schema's leader lock
and beats into ``replicas``. A crashed replica is played by terminating its
backend (``pg_terminate_backend``) from a separate connection: PostgreSQL
ends the session and with it every advisory lock the session held.

Elections are driven round by round where the order matters (no threads,
no timing); where they run on their threads, the tests poll with a deadline
and allow a generous bound for "about one interval".
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.store.base import Claim
from bot.store.sql import DatabaseError, PostgresStore
from bot.leader import LeaderElection, Replica, replicas, scheduler_url
from bot.store.sql_claims import RunClaim, claim_run
from bot.store.sql_schema import advisory_key

from ..runtime_support import wait_for
from . import pg_cluster

#: Rounds of the threaded elections: short, so a takeover is quick to see.
INTERVAL = 0.2
#: "About one election interval", with room for a busy machine.
TAKEOVER_BOUND = 2.5








@pytest.fixture
def claims() -> Iterator[list[Claim]]:
    """Claims a test took, released at the end whatever happened (releasing twice is harmless)."""
    taken: list[Claim] = []
    yield taken
    for claim in taken:
        claim.release()


@pytest.fixture
def elections(stores: Callable[..., PostgresStore]) -> Iterator[Callable[..., LeaderElection]]:
    """Makes a LeaderElection per replica on its own store; every one is stopped at the end."""
    made: list[LeaderElection] = []

    def make(name: str, **options: Any) -> LeaderElection:
        election = LeaderElection(stores(name), name=name, **options)
        made.append(election)
        return election

    yield make
    for election in made:
        election.stop()


def _sql(url: str, schema: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _holders(url: str, schema: str, purpose: str) -> list[int]:
    """The backend pids holding the advisory lock ``purpose`` of ``schema`` (as pg_locks splits a bigint key)."""
    key = advisory_key(schema, purpose) & 0xFFFF_FFFF_FFFF_FFFF
    rows = _sql(url, schema,
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
                " AND classid::bigint = %s AND objid::bigint = %s", (key >> 32, key & 0xFFFF_FFFF))
    return [int(str(pid)) for (pid,) in rows]


def _kill_holder(url: str, schema: str, purpose: str) -> int:
    """Terminate the session holding ``purpose``'s lock, as a crashed replica, and wait until it is gone."""
    holders = _holders(url, schema, purpose)
    assert len(holders) == 1, f"expected one session holding {purpose}, found {holders}"
    assert _sql(url, schema, "SELECT pg_terminate_backend(%s, 5000)", (holders[0],)) == [(True,)]
    return holders[0]


def _backends(url: str) -> set[int]:
    return {int(str(pid)) for (pid,) in _sql(url, "public", "SELECT pid FROM pg_stat_activity"
                                                             " WHERE backend_type = 'client backend'"
                                                             " AND pid <> pg_backend_pid()")}




def _shown(store: PostgresStore) -> list[tuple[str, bool]]:
    return [(r.name, r.leader) for r in replicas(store)]


# -- run claims ---------------------------------------------------------------------------------------


def test_a_run_one_replica_holds_cannot_be_claimed_by_another_until_it_is_released(
        stores: Callable[..., PostgresStore], claims: list[Claim]) -> None:
    a, b = stores("a"), stores("b")
    held = a.claim_run("demo-run-1")
    assert isinstance(held, RunClaim) and held.run_id == "demo-run-1"
    claims.append(held)
    assert repr(held) == "RunClaim('demo-run-1', held)"
    assert b.claim_run("demo-run-1") is None
    assert claim_run(b, "demo-run-1") is None  # the module function and the store method are one lock
    assert b.claim_run("demo-run-1") is None  # asking again changes nothing while it is held

    held.release()
    assert repr(held) == "RunClaim('demo-run-1', released)"
    taken = b.claim_run("demo-run-1")  # at once: no retry, no wait
    assert taken is not None
    claims.append(taken)
    assert a.claim_run("demo-run-1") is None  # now the first replica is the one refused
    held.release()  # releasing again is harmless and frees nothing of b's
    assert a.claim_run("demo-run-1") is None


def test_a_claim_whose_session_dies_is_free_at_once_for_another_replica(
        url: str, schema: str, stores: Callable[..., PostgresStore], claims: list[Claim]) -> None:
    a, b = stores("a"), stores("b")
    held = a.claim_run("demo-run-1")
    assert held is not None
    claims.append(held)
    assert b.claim_run("demo-run-1") is None

    _kill_holder(url, schema, "run:demo-run-1")  # replica a crashed: its session ended
    taken = b.claim_run("demo-run-1")
    assert taken is not None, "the claim of a dead session was not free at once"
    claims.append(taken)
    held.release()  # the dead replica's claim closes a broken session without raising
    assert repr(held) == "RunClaim('demo-run-1', released)"
    assert a.claim_run("demo-run-1") is None  # and releasing it did not free b's


def test_claims_of_different_runs_do_not_block_each_other(
        url: str, schema: str, stores: Callable[..., PostgresStore], claims: list[Claim]) -> None:
    a, b = stores("a"), stores("b")
    for store, run_id in ((a, "demo-run-1"), (b, "demo-run-2"), (a, "demo-run-3"), (b, "other-run-1")):
        claim = store.claim_run(run_id)
        assert claim is not None, f"{store.owner} could not claim {run_id}"
        claims.append(claim)
    assert a.claim_run("demo-run-2") is None and b.claim_run("demo-run-1") is None
    assert b.claim_run("demo-run-3") is None
    assert [len(_holders(url, schema, f"run:{r}")) for r in ("demo-run-1", "demo-run-2", "demo-run-3")] == [1, 1, 1]

    claims[0].release()  # freeing one run frees no other
    assert b.claim_run("demo-run-3") is None and a.claim_run("demo-run-2") is None
    again = b.claim_run("demo-run-1")
    assert again is not None
    claims.append(again)


def test_the_same_run_id_in_another_schema_and_a_run_named_leader_are_different_locks(
        tmp_path: Path, stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection],
        claims: list[Claim]) -> None:
    here = stores("a")
    elsewhere = stores("a", on_schema=pg_cluster.schema_for(tmp_path / "another bot"))
    assert here.schema != elsewhere.schema
    for store in (here, elsewhere):
        claim = store.claim_run("demo-run-1")
        assert claim is not None, f"{store.where} could not claim demo-run-1"
        claims.append(claim)

    leader = elections("leader-replica")
    assert leader.round()
    claim = stores("b").claim_run("leader")  # "run:leader" is not the election's "leader"
    assert claim is not None
    claims.append(claim)
    assert leader.round() and leader.leading


def test_claiming_a_run_twice_in_one_store_is_refused_like_another_replica(
        stores: Callable[..., PostgresStore], claims: list[Claim]) -> None:
    """Each claim is a session of its own, so a second claim of the same store is "another session":
    None. The runner never asks twice (it keeps its claims); a claim released can be taken again."""
    a = stores("a")
    first = a.claim_run("demo-run-1")
    assert first is not None
    claims.append(first)
    assert a.claim_run("demo-run-1") is None
    first.release()
    second = a.claim_run("demo-run-1")
    assert second is not None and second is not first
    claims.append(second)


def test_a_refused_claim_leaves_no_session_open_and_a_released_one_closes_its_session(
        url: str, schema: str, stores: Callable[..., PostgresStore], claims: list[Claim]) -> None:
    a, b = stores("a"), stores("b")
    held = a.claim_run("demo-run-1")
    assert held is not None
    claims.append(held)
    [holder] = _holders(url, schema, "run:demo-run-1")
    before = _backends(url)
    assert holder in before
    for _ in range(5):
        assert b.claim_run("demo-run-1") is None
    # a closed session leaves pg_stat_activity a moment after close(): poll; a leaked one never leaves
    wait_for(lambda: not (_backends(url) - before), timeout=5, what="the refused claims' sessions to end")

    held.release()
    wait_for(lambda: holder not in _backends(url), timeout=5, what="the released claim's session to end")


def test_a_claim_on_an_unreachable_database_raises_database_error_naming_the_store(
        url: str, stores: Callable[..., PostgresStore]) -> None:
    a = stores("a")
    a.engine.url = url.replace("/postgres?", "/no_such_database?")  # the database went away after the store opened
    assert a.engine.url != url
    with pytest.raises(DatabaseError) as info:
        a.claim_run("demo-run-1")
    assert str(info.value).startswith(f"{a.where}: ") and "no_such_database" in str(info.value)


# -- leader election ----------------------------------------------------------------------------------


def test_of_three_replicas_exactly_one_leads_after_a_round_and_keeps_leading(
        stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection]) -> None:
    events: list[str] = []
    three = [elections(n, on_elected=lambda n=n: events.append(f"{n} leads"),
                       on_demoted=lambda n=n: events.append(f"{n} steps down")) for n in ("b", "c", "a")]
    assert [e.round() for e in three] == [True, False, False]  # the first to try wins
    assert [e.leading for e in three] == [True, False, False]
    for _ in range(3):  # later rounds change nothing: the leader keeps its lock, the others keep failing
        assert [e.round() for e in reversed(three)] == [False, False, True]
    assert events == ["b leads"]
    assert all(e.last_error is None for e in three)
    assert _shown(stores("observer")) == [("b", True), ("a", False), ("c", False)]  # leader first, then by name


def test_replicas_lists_each_with_its_heartbeat_start_info_and_leader_flag(
        stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection]) -> None:
    a = elections("a", info={"pid": 101, "port": 8080})
    b = elections("b")
    observer = stores("observer")
    assert replicas(observer) == []
    before = _sql(observer.url, observer.schema, "SELECT now()")[0][0]
    assert a.round() and not b.round()

    shown = replicas(observer)
    assert [(r.name, r.leader, r.info) for r in shown] == [("a", True, {"pid": 101, "port": 8080}), ("b", False, {})]
    for replica in shown:
        assert isinstance(replica, Replica) and replica.heartbeat.tzinfo is not None
        assert before <= replica.started_at <= replica.heartbeat  # type: ignore[operator]
    first = {r.name: r for r in shown}

    assert shown[0].to_dict() == {"name": "a", "leader": True, "heartbeat": shown[0].heartbeat.isoformat(),
                                  "started_at": shown[0].started_at.isoformat(), "info": {"pid": 101, "port": 8080}}
    assert "info" not in shown[1].to_dict()  # no info, no key
    assert json.loads(json.dumps([r.to_dict() for r in shown]))[1]["name"] == "b"

    def beaten_again() -> bool:  # each round beats: the heartbeat moves on, started_at stays
        a.round(), b.round()
        now = {r.name: r for r in replicas(observer)}
        return all(now[n].heartbeat > first[n].heartbeat for n in ("a", "b"))

    wait_for(beaten_again, timeout=5, what="a later heartbeat from each replica")
    again = {r.name: r for r in replicas(observer)}
    assert {n: r.started_at for n, r in again.items()} == {n: r.started_at for n, r in first.items()}
    assert [(r.name, r.leader) for r in again.values()] == [("a", True), ("b", False)]


def test_a_stopped_leader_hands_over_at_the_next_round_and_stays_listed_not_leading(
        stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection]) -> None:
    events: list[str] = []
    a = elections("a", on_elected=lambda: events.append("a leads"), on_demoted=lambda: events.append("a steps down"))
    b = elections("b", on_elected=lambda: events.append("b leads"))
    observer = stores("observer")
    assert a.round() and not b.round()

    a.stop()
    assert not a.leading and events == ["a leads", "a steps down"]
    assert _shown(observer) == [("a", False), ("b", False)]  # stopped: still listed, no longer the leader
    stopped_beat = next(r.heartbeat for r in replicas(observer) if r.name == "a")
    assert b.round(), "the lock was not free at once after the leader stopped"
    assert events == ["a leads", "a steps down", "b leads"]
    assert _shown(observer) == [("b", True), ("a", False)]
    assert b.round()
    assert next(r.heartbeat for r in replicas(observer) if r.name == "a") == stopped_beat  # a beats no more

    c = elections("c")
    assert not c.round()  # the new leader holds the lock like the first did
    a.stop()  # stopping again is harmless
    assert _shown(observer) == [("b", True), ("a", False), ("c", False)]


def test_a_leader_whose_session_is_killed_is_replaced_and_steps_down_when_it_notices(
        url: str, schema: str, stores: Callable[..., PostgresStore],
        elections: Callable[..., LeaderElection]) -> None:
    events: list[str] = []
    a = elections("a", on_elected=lambda: events.append("a leads"), on_demoted=lambda: events.append("a steps down"))
    b = elections("b", on_elected=lambda: events.append("b leads"))
    observer = stores("observer")
    assert a.round() and not b.round()

    _kill_holder(url, schema, "leader")  # a's session is cut, as if its host vanished
    assert b.round(), "another replica did not win at its next try"
    assert _shown(observer) == [("b", True), ("a", False)]  # the new leader clears the old one's flag
    assert a.leading  # a has not noticed yet: it was not asked
    assert not a.round()  # its next round notices the dead session and steps down at once
    assert events == ["a leads", "b leads", "a steps down"]
    assert a.last_error is not None
    assert not a.round()  # a new session competes again and loses to b
    assert a.last_error is None
    assert _shown(observer) == [("b", True), ("a", False)]
    assert _holders(url, schema, "leader") != []


def test_a_database_that_cannot_be_reached_is_named_once_in_the_warning(
        elections: Callable[..., LeaderElection], caplog: pytest.LogCaptureFixture) -> None:
    a = elections("a")
    a.store.engine.url = "postgresql://nobody@/postgres?host=/nonexistent-socket-dir"  # the server went away
    with caplog.at_level(logging.WARNING, logger="bot.leader"):
        assert not a.round()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "bot.leader"]
    assert warning.startswith("leader election: DatabaseError: ") and warning.count(a.store.where) == 1, warning


def test_elections_on_different_schemas_do_not_compete(
        tmp_path: Path, stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection]) -> None:
    here = elections("a")
    there = LeaderElection(stores("a", on_schema=pg_cluster.schema_for(tmp_path / "another bot")), name="a")
    try:
        assert here.round() and there.round()
    finally:
        there.stop()


def test_on_their_threads_one_of_three_leads_and_another_takes_over_within_an_interval_when_it_stops(
        stores: Callable[..., PostgresStore], elections: Callable[..., LeaderElection]) -> None:
    three = [elections(n, interval=INTERVAL) for n in ("a", "b", "c")]
    observer = stores("observer")
    for election in three:
        election.start()
    leader = wait_for(lambda: [e for e in three if e.leading], timeout=5, what="a leader")
    assert len(leader) == 1
    wait_for(lambda: len(replicas(observer)) == 3, timeout=5, what="every replica's heartbeat")
    assert [r.name for r in replicas(observer) if r.leader] == [leader[0].name]

    rest = [e for e in three if e is not leader[0]]
    overlap: list[list[str]] = []
    watching = threading.Event()

    def watch() -> None:  # never two leaders among the replicas still competing
        while not watching.is_set():
            leading = [e.name for e in rest if e.leading]
            if len(leading) > 1:
                overlap.append(leading)
            time.sleep(0.001)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        stopped = time.monotonic()
        leader[0].stop()
        successor = wait_for(lambda: [e for e in rest if e.leading], timeout=10, what="a new leader")
        took = time.monotonic() - stopped
        assert took < TAKEOVER_BOUND, f"the new leader took {took:.2f}s (interval {INTERVAL}s)"
        wait_for(lambda: [r.name for r in replicas(observer) if r.leader] == [successor[0].name], timeout=5,
                 what="replicas() to name the new leader only")
        time.sleep(3 * INTERVAL)  # a few more rounds: the successor keeps it, nobody else takes it
        assert [e.name for e in rest if e.leading] == [successor[0].name]
    finally:
        watching.set()
        watcher.join(5)
    assert overlap == []
    assert not leader[0].leading


def test_on_their_threads_a_leader_whose_session_is_killed_is_replaced_within_an_interval(
        url: str, schema: str, stores: Callable[..., PostgresStore],
        elections: Callable[..., LeaderElection]) -> None:
    demoted = threading.Event()
    a = elections("a", interval=INTERVAL, on_demoted=demoted.set)
    b = elections("b", interval=INTERVAL)
    observer = stores("observer")
    assert a.round()  # a leads before either thread starts
    a.start()
    b.start()
    wait_for(lambda: len(replicas(observer)) == 2, timeout=5, what="b's heartbeat")
    assert a.leading and not b.leading

    killed_pid = _kill_holder(url, schema, "leader")
    killed = time.monotonic()
    wait_for(lambda: b.leading, timeout=10, what="b to take over")
    took = time.monotonic() - killed
    assert took < TAKEOVER_BOUND, f"the new leader took {took:.2f}s (interval {INTERVAL}s)"
    assert demoted.wait(5), "the old leader did not step down"
    wait_for(lambda: _shown(observer) == [("b", True), ("a", False)], timeout=5, what="a listed as not leading")
    assert not a.leading and _holders(url, schema, "leader") not in ([], [killed_pid])


# -- the scheduler's job store --------------------------------------------------------------------------


def test_scheduler_url_is_the_same_database_with_the_psycopg_dialect_and_refuses_others_without_secrets() -> None:
    for given in ("postgresql://bot:pw@db:5432/loops?sslmode=require", "postgres://bot:pw@db:5432/loops?sslmode=require",
                  "postgresql+psycopg://bot:pw@db:5432/loops?sslmode=require"):
        assert scheduler_url(given) == "postgresql+psycopg://bot:pw@db:5432/loops?sslmode=require", given
    for other in ("mysql://bot:s3cret@db/loops", "sqlite:///jobs.sqlite", "db:5432"):
        with pytest.raises(ValueError, match="not a PostgreSQL URL") as info:
            scheduler_url(other)
        assert "s3cret" not in str(info.value)
