"""A pipelined PostgreSQL write (the cast's) reads each statement's own rows, whatever ran before it unread.

psycopg's pipeline mode hands results to cursors as they arrive, and each
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

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from bot.store import sql_schema
from bot.store.engines import DatabaseError, Postgres

from . import pg_cluster

pytestmark = pytest.mark.skipif(pg_cluster.unavailable() is not None, reason=str(pg_cluster.unavailable()))

ATTEMPTS = 40


class _AlwaysPipelined(Postgres):
    """An engine whose every write is pipelined, as the cast's is."""

    def write(self, *, pipelined: bool = False) -> AbstractContextManager[Any]:
        return super().write(pipelined=True)


@pytest.fixture
def engine(url: str, schema: str) -> Iterator[Postgres]:
    engine = Postgres(url, schema)
    yield engine
    engine.close()


def test_each_statement_of_a_pipelined_write_reads_its_own_rows(engine: Postgres) -> None:
    """A NOTICE, or a result past the server's output buffer, makes the server send the rows before it early."""
    sql_schema.migrate(engine, "test")
    for attempt in range(ATTEMPTS):
        with engine.write(pipelined=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (attempt,))  # a void row, never fetched
            cur.execute("DO $$ BEGIN RAISE NOTICE 'sent at once'; END $$")
            assert cur.execute("SELECT %s::text", (f"mine {attempt}",)).fetchone() == (f"mine {attempt}",)
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (attempt,))
            cur.execute("SELECT repeat('x', 100000)")  # unread, and more than the server buffers
            cur.execute("SELECT n FROM generate_series(1, 3) AS n")
            assert cur.fetchall() == [(1,), (2,), (3,)]


def test_a_migration_in_a_pipelined_write_sees_the_schema_it_recorded(url: str, schema: str) -> None:
    engine = _AlwaysPipelined(url, schema)
    try:
        assert sql_schema.migrate(engine, "test") == (0, sql_schema.SCHEMA_VERSION)
        for _ in range(ATTEMPTS):  # under the advisory lock, the recorded version is read - not the lock's row
            assert sql_schema.migrate(engine, "test") == (sql_schema.SCHEMA_VERSION, sql_schema.SCHEMA_VERSION)
    finally:
        engine.close()


def test_a_write_that_fails_unread_in_a_pipelined_block_commits_nothing_of_it(engine: Postgres) -> None:
    """The error comes back at a later statement or at the commit, never as a commit of the rows around it."""
    sql_schema.migrate(engine, "test")
    insert = "INSERT INTO counters (prefix, last) VALUES (%s, %s)"
    with engine.write() as cur:
        cur.execute(insert, ("taken", 1))
    with pytest.raises(DatabaseError, match="UniqueViolation"), engine.write(pipelined=True) as cur:
        cur.execute(insert, ("before", 1))
        cur.execute(insert, ("taken", 2))  # fails on the server; nothing here waits for its answer
        cur.execute(insert, ("after", 3))
    with engine.read() as cur:
        assert cur.execute("SELECT prefix, last FROM counters ORDER BY prefix").fetchall() == [("taken", 1)]
