"""PostgresStore specifics: schema versions, config, errors, and the leases that keep replicas from doubling work."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.config import load_config
from bot.review_records import Vote
from bot.reviews import cast_vote
from bot.store import NewerFormatError, StoreError, open_store
from bot.store.sql import DatabaseError, PostgresStore
from bot.store.sql_schema import SCHEMA_VERSION
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review, make_task

ROOT = Path(__file__).resolve().parents[3]






def _sql(url: str, schema: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        cur = conn.execute(statement, params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def test_the_schema_version_is_recorded_and_migrating_again_changes_nothing(url: str, schema: str) -> None:
    PostgresStore(url, schema=schema)
    assert _sql(url, schema, "SELECT version FROM loopbot_schema") == [(SCHEMA_VERSION,)]
    PostgresStore(url, schema=schema).put_review(make_review())
    PostgresStore(url, schema=schema)
    assert [r.id for r in PostgresStore(url, schema=schema).list_reviews()] == ["demo-1"]


def test_replicas_starting_together_migrate_once(url: str, schema: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            PostgresStore(url, schema=schema)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []


def test_a_newer_schema_is_refused_by_name(url: str, schema: str) -> None:
    PostgresStore(url, schema=schema)
    _sql(url, schema, "UPDATE loopbot_schema SET version = %s, written_by = '9.9.9'", (SCHEMA_VERSION + 1,))
    for migrate in (True, False):
        with pytest.raises(NewerFormatError) as info:
            PostgresStore(url, schema=schema, migrate=migrate)
        message = str(info.value)
        assert f"schema {schema}" in message and f"schema version {SCHEMA_VERSION + 1}" in message
        assert "loopbot 9.9.9" in message and f"up to {SCHEMA_VERSION}" in message and "upgrade loopbot" in message
        assert "postgres@" in message or "postgresql://" in message


def test_an_unmigrated_database_is_refused_without_migrate(url: str, schema: str) -> None:
    with pytest.raises(StoreError, match="loopbot migrate"):
        PostgresStore(url, schema=schema, migrate=False)


def test_a_newer_document_is_refused_naming_the_row(url: str, schema: str) -> None:
    store = PostgresStore(url, schema=schema)
    store.put_review(make_review())
    _sql(url, schema, "UPDATE reviews SET doc = jsonb_set(doc::jsonb, '{format}', '7')::text")
    with pytest.raises(NewerFormatError, match="reviews/demo-1.*version 7"):
        store.get_review("demo-1")


def test_an_unreachable_database_is_an_os_error_without_the_password(tmp_path: Path) -> None:
    sock = tmp_path / "nowhere"
    sock.mkdir()
    with pytest.raises(DatabaseError) as info:
        PostgresStore(f"postgresql://bot:s3cret@/db?host={sock}", schema="x")
    assert isinstance(info.value, OSError) and "s3cret" not in str(info.value)
    assert "postgresql://bot@" in str(info.value)


def test_the_config_chooses_the_store_and_honours_database_url(
    tmp_path: Path, url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", url)
    path = tmp_path / "config.yaml"
    path.write_text(f"store:\n  url: ${{DATABASE_URL}}\n  schema: {schema}\n")
    config = load_config(path)
    store = open_store(config)
    assert isinstance(store, PostgresStore) and store.schema == schema
    assert url in list(config.secret_values()) and "***" in str(config.redacted())
    path.write_text("state_dir: ./here\n")
    assert type(open_store(load_config(path))).__name__ == "SqliteStore"
    path.write_text("store:\n  url: mysql://x/y\n")
    with pytest.raises(ValueError, match="store.url"):
        load_config(path)


# -- leases: work handed to one replica is not handed to another ------------------


def _replicas(url: str, schema: str, lease: float = 60.0) -> tuple[PostgresStore, PostgresStore]:
    return (PostgresStore(url, schema=schema, owner="replica-a", lease=lease),
            PostgresStore(url, schema=schema, owner="replica-b", lease=lease))


def test_a_decided_review_goes_to_one_replica_until_its_lease_expires(url: str, schema: str) -> None:
    a, b = _replicas(url, schema)
    a.put_review(make_review("demo-1"))
    a.put_review(make_review("demo-2"))
    for review_id in ("demo-1", "demo-2"):
        a.update_review(review_id, lambda r: cast_vote(r, Vote("local:x", HumanDecision.APPROVE), now=T0))
    assert [r.id for r in a.decided_reviews()] == ["demo-1", "demo-2"]
    assert b.decided_reviews() == [] and [r.id for r in a.decided_reviews()] == ["demo-1", "demo-2"]
    assert b.counts()["decided_reviews"] == 2  # status still counts everything
    _sql(url, schema, "UPDATE reviews SET lease_until = now() - interval '1 second'")  # replica-a died
    assert [r.id for r in b.decided_reviews()] == ["demo-1", "demo-2"] and a.decided_reviews() == []


def test_an_export_takes_no_request_from_the_replicas_and_holds_those_they_hold(url: str, schema: str) -> None:
    from bot.store.sql_transfer import dump

    a, b = _replicas(url, schema)
    held = a.enqueue_request("run", {"loop": "held"})
    assert [r.id for r in a.take_requests()] == [held]  # replica-a is running it
    free = a.enqueue_request("run", {"loop": "free"})
    exporter = PostgresStore(url, schema=schema, owner="export")
    assert [q["id"] for q in dump(exporter)["requests"]] == [held, free]
    assert [r.id for r in b.take_requests()] == [free]  # the export leased nothing: a replica takes it at once


def test_requests_and_tasks_are_leased_and_taken_over(url: str, schema: str) -> None:
    a, b = _replicas(url, schema, lease=0.5)
    first = a.enqueue_request("run", {"loop": "demo"})
    assert [r.id for r in b.take_requests()] == [first] and a.take_requests() == []
    assert a.add_task(make_task("t.post"))
    assert [t.id for t in a.due_tasks("slack", T0)] == ["t.post"] and b.due_tasks("slack", T0) == []
    import time

    time.sleep(0.7)  # neither asked again: both leases expired
    assert [r.id for r in a.take_requests()] == [first] and [t.id for t in b.due_tasks("slack", T0)] == ["t.post"]
    a.finish_request(first)
    assert b.take_requests() == []


def test_concurrent_replicas_take_each_task_once(url: str, schema: str) -> None:
    stores = [PostgresStore(url, schema=schema, owner=f"r{i}") for i in range(3)]
    for n in range(60):
        stores[0].add_task(make_task(f"t{n}.post"))
    taken: list[str] = []
    lock = threading.Lock()

    def worker(store: PostgresStore) -> None:
        while True:
            batch = store.due_tasks("slack", T0, limit=5)
            if not batch and not store.pending_tasks():
                return
            for task in batch:
                with lock:
                    taken.append(task.id)
                store.finish_tasks([task.id])

    threads = [threading.Thread(target=worker, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(taken) == sorted(f"t{n}.post" for n in range(60))  # each once, none lost


# -- CI: the PostgreSQL tests may not skip there --------------------------------------


def test_without_binaries_the_tests_skip_but_fail_under_ci(tmp_path: Path) -> None:
    env = {**os.environ, "LOOPBOT_PG_BIN": str(tmp_path / "missing")}
    target = "tests/bot/store/test_store_contract.py::test_snapshots_load_as_imported_until_a_state_replaces_them"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", target]
    local = subprocess.run(args, cwd=ROOT, env={**env, "CI": ""}, capture_output=True, text=True, timeout=120)
    assert local.returncode == 0 and "1 passed, 1 skipped" in local.stdout
    assert "PostgreSQL store tests skipped: no PostgreSQL server binaries" in local.stdout
    ci = subprocess.run(args, cwd=ROOT, env={**env, "CI": "true"}, capture_output=True, text=True, timeout=120)
    assert ci.returncode == 1 and "PostgreSQL tests must run in CI" in ci.stdout


def test_run_counts_can_be_read_from_the_loop_status_index_alone(url: str, schema: str) -> None:
    import psycopg

    from bot.store.sql_runs import RUN_COUNTS

    PostgresStore(url, schema=schema)
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}") as conn:
        conn.execute("SET enable_seqscan = off")  # a tiny table is scanned anyway: ask whether the index could serve
        plan = "\n".join(str(row[0]) for row in conn.execute("EXPLAIN " + RUN_COUNTS).fetchall())
    assert "Index Only Scan using runs_loop_status" in plan, plan
