"""The upgrade from the directory store: a state_dir it wrote is imported once, every record as it was.

tests/fixtures/legacy_state/state was written by the directory store itself
(tests/fixtures/legacy_state/make_state.py, run on the last commit that had
it), and expected.json is what that store's own readers returned for it.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.store import legacy
from bot.store.sql import SqliteStore
from bot.store.sql_schema import SCHEMA_VERSION

from .test_store_contract import recorded

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_state"
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture
def old_state(tmp_path: Path) -> Path:
    root = tmp_path / "state"
    shutil.copytree(FIXTURE / "state", root)
    (root / "local-reviews").mkdir()
    (root / "local-reviews" / "demo-1.md").write_text("# demo-1\n")
    return root


def contents(store: SqliteStore) -> dict[str, object]:
    """The store's records in the shape of expected.json."""
    runs = store.list_runs(archived=True)
    return {
        "runs": [r.to_dict() for r in runs],
        "reviews": [r.to_dict() for r in store.list_reviews(archived=True)],
        "snapshots": {r.id: store.load_snapshot(r.id) for r in runs if store.load_snapshot(r.id) is not None},
        "counters": store.counters(),
        "requests": [{"id": q.id, "kind": q.kind, "payload": q.payload} for q in store.take_requests()],
        "tasks": [t.to_dict() for t in store.pending_tasks()],
        "pending_deliveries": [[k, w] for k, w in store.pending_deliveries()],
        "delivery_keys": sorted(k for _d, k, _at in store.deliveries()),
    }


def test_every_record_arrives_as_the_directory_store_read_it(old_state: Path) -> None:
    store = SqliteStore(old_state)
    line = legacy.upgrade(old_state, store, now=NOW)
    expected = json.loads((FIXTURE / "expected.json").read_text())
    assert contents(store) == expected
    demo1 = store.get_review("demo-1")  # its votes were only in reviews/votes.jsonl
    assert [v.voter for v in demo1.history] == ["local:alice", "slack:U1"] and demo1.delivery_keys == ["k1", "k2"]
    assert store.get_review("demo-2").status == "applied" and store.get_run("demo-run-2").status == "completed"
    assert store.load_state("demo-run-1").counters == {"steps": 3}  # type: ignore[union-attr]
    assert store.next_id("demo") == "demo-4"  # counting goes on past every id handed out
    assert not recorded(store, "X-GitHub-Delivery 11")  # a redelivery is still recognised
    assert line is not None and line.startswith(f"imported the directory store of {old_state}")
    assert "3 runs, 3 reviews (5 votes), 2 snapshots, 3 id counters, 1 pending requests, 2 outbox tasks, " \
        "3 delivery keys" in line
    backup = old_state / "directory-store-backup-20260102T030405Z"
    assert str(backup) in line
    assert sorted(p.name for p in old_state.iterdir()) == [
        "directory-store-backup-20260102T030405Z", "local-reviews", "loopbot.db", "loopbot.db-shm", "loopbot.db-wal"]
    assert (backup / "reviews" / "votes.jsonl").is_file() and (backup / "deliveries" / "pending.jsonl").is_file()


def test_it_happens_once_and_a_repeat_after_a_crash_changes_nothing(old_state: Path) -> None:
    store = SqliteStore(old_state)
    copy = old_state.parent / "copy"
    shutil.copytree(old_state, copy)
    assert legacy.upgrade(old_state, store, now=NOW) is not None
    assert legacy.upgrade(old_state, store, now=NOW) is None and not legacy.found(old_state)
    # a crash after importing, before the files were moved: the next start imports them again, to the same records
    again = SqliteStore(copy)
    legacy.upgrade(copy, again, now=NOW)
    first = contents(again)
    shutil.copytree(FIXTURE / "state", copy, dirs_exist_ok=True)
    legacy.upgrade(copy, again, now=NOW)
    assert contents(again) == first


def test_a_journal_line_cut_short_was_never_acknowledged_and_is_not_imported(old_state: Path) -> None:
    journal = old_state / "reviews" / "votes.jsonl"
    journal.write_bytes(journal.read_bytes() + b'{"review":"demo-1","vote":{"voter":"local:zed","deci')
    store = SqliteStore(old_state)
    legacy.upgrade(old_state, store, now=NOW)
    assert [v.voter for v in store.get_review("demo-1").history] == ["local:alice", "slack:U1"]


def test_status_refuses_an_old_state_dir_until_migrate_imports_it(
    old_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main

    config = old_state.parent / "config.yaml"
    config.write_text("state_dir: ./state\n")
    assert main(["status", "--config", str(config)]) == 1
    assert "holds the directory store of an older loopbot; `loopbot migrate`" in capsys.readouterr().err
    assert not (old_state / "loopbot.db").exists()  # nothing answered from an empty database beside it
    assert main(["migrate", "--config", str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"loopbot.db: schema version {SCHEMA_VERSION}")
    assert out[1].startswith("imported the directory store")
    assert main(["status", "--json", "--config", str(config)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in shown["reviews"]} >= {"demo-1", "demo-3"}
