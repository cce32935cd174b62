"""SQLite failing: a damaged, locked, read-only or full database is a clear error naming the file.

A vote whose transaction could not be committed is never acknowledged (its
result is the error), nothing of it is stored, and the store works again
once the cause is gone (space returns, the lock is let go).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.review_records import Vote
from bot.store.engines import (
    DatabaseCorruptError,
    DatabaseLockedError,
    DatabaseReadOnlyError,
    DiskFullError,
)
from bot.store.sql import SqliteStore
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review


def approve(voter: str, feedback: str = "") -> Vote:
    return Vote(voter, HumanDecision.APPROVE, feedback, at=T0 + timedelta(minutes=1), delivery_key=f"key-{voter}")


def test_a_full_disk_acknowledges_no_vote_and_serving_recovers_when_space_returns(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.put_review(make_review(required=5))
    with store.engine.write() as cur:  # the database may not grow by a single page: as a full disk is to SQLite
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages}")
    result = store.cast_votes({"demo-1": [(approve("local:alice", "x" * 200_000), None)]})["demo-1"]
    assert isinstance(result, DiskFullError)
    assert str(tmp_path / "loopbot.db") in str(result) and "nothing was committed" in str(result)
    big = make_review("demo-2")
    big.request["text"] = "y" * 200_000
    with pytest.raises(DiskFullError, match="loopbot.db"):
        store.put_review(big)
    assert SqliteStore(tmp_path).get_review("demo-1").votes == []  # another process sees nothing of it
    with store.engine.write() as cur:  # space returns
        cur.execute("PRAGMA max_page_count = 1073741823")
    (cast,) = store.cast_votes({"demo-1": [(approve("local:alice", "x" * 200_000), None)]})["demo-1"]  # type: ignore[misc]
    assert cast.accepted
    assert [v.voter for v in SqliteStore(tmp_path).get_review("demo-1").votes] == ["local:alice"]


def test_a_writer_holding_the_lock_too_long_is_named_and_then_waited_for(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path, busy_timeout=0.2)
    store.put_review(make_review(required=5))
    other = sqlite3.connect(tmp_path / "loopbot.db", isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction
    result = store.cast_votes({"demo-1": [(approve("local:alice"), None)]})["demo-1"]
    assert isinstance(result, DatabaseLockedError) and str(tmp_path / "loopbot.db") in str(result)
    assert "stayed locked by another process for 0.2 s" in str(result)
    assert store.get_review("demo-1").votes == []  # readers are not blocked by a writer (WAL)
    patient = SqliteStore(tmp_path, busy_timeout=10)
    released = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    released.start()
    (cast,) = patient.cast_votes({"demo-1": [(approve("local:bob"), None)]})["demo-1"]  # type: ignore[misc]
    released.join()
    assert cast.accepted
    other.close()


def test_a_read_only_database_is_named_and_what_it_holds_still_reads(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.put_review(make_review())
    with store.engine.write() as cur:
        cur.execute("PRAGMA query_only = ON")  # as a file or file system this process may not write
    result = store.cast_votes({"demo-1": [(approve("local:alice"), None)]})["demo-1"]
    assert isinstance(result, DatabaseReadOnlyError) and str(tmp_path / "loopbot.db") in str(result)
    assert "check that this user may write the file and its directory" in str(result)
    assert store.get_review("demo-1").votes == []


def test_a_damaged_database_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("state_dir: ./state\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "loopbot.db").write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    with pytest.raises(DatabaseCorruptError, match=str(tmp_path / "state" / "loopbot.db")):
        SqliteStore(tmp_path / "state")
    for command in (["status"], ["decide", "demo-1", "approve", "--as", "alice"]):
        assert main([*command, "--config", str(config)]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(tmp_path / "state" / "loopbot.db") in err, err
        assert "the database is damaged" in err and "restore it from a backup" in err


def test_a_mutator_that_writes_joins_the_transaction_instead_of_waiting_for_itself(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)
    store.put_review(make_review())

    def note(review: object) -> str:
        return store.next_id("note")  # a write from inside update_review, on the same thread

    assert store.update_review("demo-1", note) == "note-1"
    assert SqliteStore(tmp_path).next_id("note") == "note-2"


def test_a_vote_appends_one_row_and_a_review_stored_before_the_votes_table_keeps_its_history(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path)
    store.put_review(make_review(required=99))
    for n in range(3):
        store.cast_votes({"demo-1": [(approve(f"local:v{n}"), None)]})
    with sqlite3.connect(tmp_path / "loopbot.db") as conn:
        assert conn.execute("SELECT seq FROM review_votes ORDER BY seq").fetchall() == [(0,), (1,), (2,)]
        assert "history" not in conn.execute("SELECT doc FROM reviews").fetchone()[0]  # the row stays small
        # the database as schema 3 kept it: the history inside the document, no votes table (nor version 5's index)
        whole = json.dumps(store.get_review("demo-1").to_dict())
        conn.execute("DROP TABLE review_votes")
        conn.execute("DROP INDEX runs_loop_status")
        conn.execute("DROP TABLE review_keys")
        conn.execute("DROP TABLE review_ballots")
        conn.execute("DROP INDEX outbox_failing")
        conn.execute("ALTER TABLE outbox DROP COLUMN attempts")
        conn.execute("UPDATE reviews SET doc = ?", (whole,))
        conn.execute("UPDATE loopbot_schema SET version = 3")
    store.close()
    again = SqliteStore(tmp_path)  # migrated to 4, 5, 6, 7 and 8 on open
    assert [v.voter for v in again.get_review("demo-1").history] == ["local:v0", "local:v1", "local:v2"]
    again.cast_votes({"demo-1": [(approve("local:v3"), None)]})
    assert [v.voter for v in SqliteStore(tmp_path).get_review("demo-1").history] == [
        "local:v0", "local:v1", "local:v2", "local:v3"]
    with sqlite3.connect(tmp_path / "loopbot.db") as conn:
        assert conn.execute("SELECT count(*) FROM review_votes").fetchone()[0] == 4
