"""``loopbot migrate``, ``export`` and ``import``: SQLite to a JSON dump to PostgreSQL and back, nothing lost."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.review_records import Vote
from bot.reviews import cast_vote, mark_applied
from bot.store import SqliteStore, Store
from bot.store.sql import PostgresStore
from bot.store.sql_schema import SCHEMA_VERSION
from loop_engine.checkpoint import HumanDecision

from . import pg_cluster
from .test_sql_store import _sql
from .test_store_contract import recorded, T0, make_review, make_run, make_task
from .test_store_queries import big_state


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    schema = pg_cluster.schema_for(tmp_path)
    path.write_text(f"state_dir: ./state\nstore:\n  url: {pg_cluster.url()}\n  schema: {schema}\n")
    return path


def fill(store: Store) -> None:
    """A bot's worth of state: hot and archived runs and reviews, N-of-M votes, snapshots, inbox, outbox, keys."""
    for n in range(1, 6):
        store.put_run(make_run(f"demo-run-{n}", created_at=T0 + timedelta(minutes=n), trigger=f"request-{n}"))
        store.save_state(f"demo-run-{n}", big_state(n))
    for n in (1, 2):
        store.update_run(f"demo-run-{n}", lambda r: setattr(r, "status", "completed"))
    for n in range(1, 5):
        review = make_review(f"demo-{n}", required=3, created_at=T0 + timedelta(minutes=n))
        review.run_id = f"demo-run-{n}"
        store.put_review(review)
        for voter in ("alice", "bob", "carol")[: n % 4]:
            store.update_review(f"demo-{n}", lambda r, v=voter: cast_vote(r, Vote(f"local:{v}", HumanDecision.APPROVE),
                                                                         now=T0))
    store.update_review("demo-3", lambda r: mark_applied(r, now=T0))
    for _ in range(4):
        store.next_id("demo")
    store.enqueue_request("run", {"loop": "demo", "trigger": "cli"})
    store.add_task(make_task("demo-4.post.slack-C1", not_before=T0 + timedelta(hours=1), attempts=2))
    recorded(store, "gh-delivery-1")
    recorded(store, "gh-delivery-2", [{"queued": "vote"}])  # accepted, not yet cast


def assert_same(a: Store, b: Store) -> None:
    assert [r.to_dict() for r in a.list_runs(archived=True)] == [r.to_dict() for r in b.list_runs(archived=True)]
    assert [r.to_dict() for r in a.list_reviews(archived=True)] == [r.to_dict() for r in b.list_reviews(archived=True)]
    assert [r.id for r in a.open_reviews()] == [r.id for r in b.open_reviews()]
    assert a.counts() == b.counts()
    for n in range(1, 6):
        assert a.load_snapshot(f"demo-run-{n}") == b.load_snapshot(f"demo-run-{n}")
    assert [(r.id, r.payload) for r in a.take_requests()] == [(r.id, r.payload) for r in b.take_requests()]
    assert [t.to_dict() for t in a.pending_tasks()] == [t.to_dict() for t in b.pending_tasks()]
    assert a.pending_deliveries() == b.pending_deliveries() == [("gh-delivery-2", [{"queued": "vote"}])]


def test_migrate_creates_then_reports_the_schema(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--config", str(config)]) == 0
    assert f"schema version {SCHEMA_VERSION} (was 0)" in capsys.readouterr().out
    assert main(["migrate", "--config", str(config)]) == 0
    assert f"schema version {SCHEMA_VERSION} (already)" in capsys.readouterr().out


def test_migrate_refuses_a_newer_schema(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--config", str(config)]) == 0
    _sql(pg_cluster.url(), pg_cluster.schema_for(tmp_path), "UPDATE loopbot_schema SET version = 99")
    for command in (["migrate"], ["status"]):
        assert main([*command, "--config", str(config)]) == 1
        assert "schema version 99" in capsys.readouterr().err


def test_migrate_on_sqlite_creates_the_database_and_refuses_a_newer_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("state_dir: ./state\n")
    assert main(["migrate", "--config", str(plain)]) == 0
    assert f"{tmp_path / 'state' / 'loopbot.db'}: schema version {SCHEMA_VERSION}" in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "state" / "loopbot.db") as conn:
        conn.execute("UPDATE loopbot_schema SET version = 99, written_by = '9.9'")
    for command in (["migrate"], ["status"], ["decide", "demo-1", "approve"]):
        assert main([*command, "--config", str(plain)]) == 1
        err = capsys.readouterr().err
        assert f"{tmp_path / 'state' / 'loopbot.db'}: schema version 99 (migrated by loopbot 9.9)" in err


def test_sqlite_to_a_dump_to_postgres_and_back_loses_no_review_or_vote(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text("state_dir: ./sqlite\n")
    original = SqliteStore(tmp_path / "sqlite")
    fill(original)
    dump = tmp_path / "dump.json"
    assert main(["export", str(dump), "--config", str(plain)]) == 0
    assert "5 runs, 4 reviews (6 votes), 5 snapshots" in capsys.readouterr().out
    assert main(["export", str(dump), "--config", str(plain)]) == 1  # never over an existing file
    assert "exists" in capsys.readouterr().err
    assert main(["import", str(dump), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "5 runs, 4 reviews (6 votes), 5 snapshots" in out and "1 pending requests, 1 outbox tasks" in out
    database = PostgresStore(pg_cluster.url(), schema=pg_cluster.schema_for(tmp_path))
    assert_same(original, database)
    assert database.next_id("demo") == "demo-5" and database.next_id("request") == "request-2"
    assert not recorded(database, "gh-delivery-1")
    assert database.get_review("demo-3").approvals == ["local:alice", "local:bob", "local:carol"]

    assert main(["import", str(dump), "--config", str(config)]) == 1  # not into a store that holds runs already
    assert "already holds runs" in capsys.readouterr().err

    back_dump, back = tmp_path / "back.json", tmp_path / "back.yaml"
    back.write_text("state_dir: ./back\n")
    assert main(["export", str(back_dump), "--config", str(config)]) == 0
    assert main(["import", str(back_dump), "--config", str(back)]) == 0
    exported = SqliteStore(tmp_path / "back")
    assert_same(database, exported)
    assert exported.next_id("demo") == "demo-6" and not recorded(exported, "gh-delivery-1")
    assert exported.load_state("demo-run-5") is not None
    assert [r.to_dict() for r in exported.list_reviews(archived=True)] == [
        r.to_dict() for r in original.list_reviews(archived=True)]


def test_a_directory_store_imports_into_postgres(config: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).resolve().parents[2] / "fixtures" / "legacy_state" / "state", old)
    assert main(["import", str(old), "--config", str(config)]) == 0
    assert "3 runs, 3 reviews (5 votes), 2 snapshots" in capsys.readouterr().out
    database = PostgresStore(pg_cluster.url(), schema=pg_cluster.schema_for(tmp_path))
    assert [v.voter for v in database.get_review("demo-1").history] == ["local:alice", "slack:U1"]
