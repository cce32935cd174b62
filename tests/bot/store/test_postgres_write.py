"""A PostgreSQL write is one pipeline and its one transaction: it reads each statement's own rows, whatever ran
before it unread; what it sends commits at its end, all or nothing, and its locks hold until then.

The write sends no BEGIN or COMMIT: the server runs what comes before a
pipeline's Sync as one transaction (asking for rows only flushes), commits it
at the Sync, and rolls it back if a statement failed; a block that raises
sends ROLLBACK first. psycopg's pipeline mode hands results to cursors as they arrive, and each
``execute`` takes in whatever has arrived. The server sends what it has
early when a statement raises a NOTICE (``CREATE SCHEMA IF NOT EXISTS`` on
an existing schema) or its output buffer fills; on one shared cursor the
void row of an earlier, unread ``pg_advisory_xact_lock`` then landed after
the next ``execute`` and was what its ``fetchone`` returned. That is why the
schema migration, pipelined, read "no schema table yet" and failed with
``DuplicateTable``. It is a matter of timing (a fifth to two thirds of such
transactions here), so each test repeats it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from bot.store import sql_schema
from bot.store.engines import DatabaseError, Postgres

from . import pg_cluster

pytestmark = pytest.mark.skipif(pg_cluster.unavailable() is not None, reason=str(pg_cluster.unavailable()))

ATTEMPTS = 40


@pytest.fixture
def engine(url: str, schema: str) -> Iterator[Postgres]:
    engine = Postgres(url, schema)
    yield engine
    engine.close()


def test_each_statement_of_a_write_reads_its_own_rows(engine: Postgres) -> None:
    """A NOTICE, or a result past the server's output buffer, makes the server send the rows before it early."""
    sql_schema.migrate(engine, "test")
    for attempt in range(ATTEMPTS):
        with engine.write() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (attempt,))  # a void row, never fetched
            cur.execute("DO $$ BEGIN RAISE NOTICE 'sent at once'; END $$")
            assert cur.execute("SELECT %s::text", (f"mine {attempt}",)).fetchone() == (f"mine {attempt}",)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (attempt,))
            cur.execute("SELECT repeat('x', 100000)")  # unread, and more than the server buffers
            cur.execute("SELECT n FROM generate_series(1, 3) AS n")
            assert cur.fetchall() == [(1,), (2,), (3,)]


def test_a_migration_in_a_write_sees_the_schema_it_recorded(url: str, schema: str) -> None:
    engine = Postgres(url, schema)
    try:
        assert sql_schema.migrate(engine, "test") == (0, sql_schema.SCHEMA_VERSION)
        for _ in range(ATTEMPTS):  # under the advisory lock, the recorded version is read - not the lock's row
            assert sql_schema.migrate(engine, "test") == (sql_schema.SCHEMA_VERSION, sql_schema.SCHEMA_VERSION)
    finally:
        engine.close()


def test_a_write_is_one_transaction_until_its_end_and_holds_its_locks_across_reads(engine: Postgres) -> None:
    sql_schema.migrate(engine, "test")
    with engine.write() as cur:
        cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, %s)", ("locked", 1))
    other = engine.connect()
    try:
        with engine.write() as cur:
            assert cur.execute("SELECT last FROM counters WHERE prefix = %s FOR UPDATE", ("locked",)).fetchone() == (1,)
            cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, %s)", ("unseen", 2))
            assert cur.execute("SELECT count(*) FROM counters").fetchone() == (2,)  # read, so flushed: still open
            assert other.execute("SELECT prefix FROM counters").fetchall() == [("locked",)]  # not committed yet
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("SELECT last FROM counters WHERE prefix = 'locked' FOR UPDATE NOWAIT")
        assert other.execute("SELECT prefix FROM counters ORDER BY prefix").fetchall() == [("locked",), ("unseen",)]
    finally:
        other.close()


def test_a_write_that_fails_unread_commits_nothing_of_it(engine: Postgres) -> None:
    """The error comes back at a later statement or at the commit, never as a commit of the rows around it."""
    sql_schema.migrate(engine, "test")
    insert = "INSERT INTO counters (prefix, last) VALUES (%s, %s)"
    with engine.write() as cur:
        cur.execute(insert, ("taken", 1))
    with pytest.raises(DatabaseError, match="UniqueViolation"), engine.write() as cur:
        cur.execute(insert, ("before", 1))
        cur.execute(insert, ("taken", 2))  # fails on the server; nothing here waits for its answer
        cur.execute(insert, ("after", 3))
    with engine.read() as cur:
        assert cur.execute("SELECT prefix, last FROM counters ORDER BY prefix").fetchall() == [("taken", 1)]
    with engine.write() as cur:  # the connection left aborted is not the next write's
        cur.execute(insert, ("later", 4))
    with engine.read() as cur:
        assert cur.execute("SELECT prefix FROM counters ORDER BY prefix").fetchall() == [("later",), ("taken",)]


def test_an_exception_inside_a_write_rolls_back_what_it_sent(engine: Postgres) -> None:
    """BEGIN and COMMIT are the engine's own statements in the pipeline: a block that raises sends ROLLBACK."""
    sql_schema.migrate(engine, "test")
    insert = "INSERT INTO counters (prefix, last) VALUES (%s, %s)"
    with pytest.raises(RuntimeError, match="the review's own failure"), engine.write() as cur:
        cur.execute(insert, ("sent", 1))
        for _ in range(6):  # psycopg prepares a statement run 5 times, and deallocates it after a ROLLBACK
            assert cur.execute("SELECT last FROM counters WHERE prefix = %s", ("sent",)).fetchone() == (1,)
        raise RuntimeError("the review's own failure")
    with pytest.raises(DatabaseError, match="DivisionByZero"), engine.write() as cur:  # failed, and then rolled back
        cur.execute(insert, ("sent", 1))
        cur.execute("SELECT 1 / 0").fetchone()
    with engine.write() as cur:
        cur.execute(insert, ("next", 2))
    with engine.snapshot() as cur:  # on the connection that rolled back (psycopg then deallocates what it prepared)
        assert cur.execute("SELECT prefix, last FROM counters").fetchall() == [("next", 2)]


_KILLED_MID_WRITE = """
import sys
from bot.store.engines import Postgres
engine = Postgres(sys.argv[1], sys.argv[2])
with engine.write() as cur:
    cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, %s)", ("sent", 1))
    cur.execute("UPDATE counters SET last = last + 1 WHERE prefix = %s", ("kept",))
    assert cur.execute("SELECT last FROM counters WHERE prefix = %s", ("sent",)).fetchone() == (1,)  # flushed
    print("inside", flush=True)
    sys.stdin.read()  # killed here: the server has run both statements, and no Sync was sent
"""


def test_kill_9_inside_a_write_commits_none_of_what_the_server_already_ran(engine: Postgres, url: str,
                                                                          schema: str) -> None:
    sql_schema.migrate(engine, "test")
    with engine.write() as cur:
        cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, %s)", ("kept", 7))
    child = subprocess.Popen([sys.executable, "-c", _KILLED_MID_WRITE, url, schema], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
    try:
        assert child.stdout is not None and child.stdout.readline() == "inside\n"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    with engine.write() as cur:  # the row it updated is free again: the killed transaction is gone
        cur.execute("UPDATE counters SET last = last + 1 WHERE prefix = %s", ("kept",))
    with engine.read() as cur:
        assert cur.execute("SELECT prefix, last FROM counters ORDER BY prefix").fetchall() == [("kept", 8)]
