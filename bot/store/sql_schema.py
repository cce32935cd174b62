"""The store's tables, on both engines: created and migrated by the bot, the schema version recorded.

Every migration runs in one transaction - on PostgreSQL under an advisory
lock, on SQLite under ``BEGIN IMMEDIATE`` (the file's write lock) - so
processes starting together migrate once and never see half a schema. The
statements are PostgreSQL's, read by SQLite through ``engines.translate``.
The version is kept in ``loopbot_schema``; a database migrated by a newer
loopbot is refused by name (database, both versions) rather than misread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .base import NewerFormatError, StoreError

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "advisory_key", "check", "migrate", "prepare"]

#: The schema this loopbot writes and reads; a database at a higher version is refused.
SCHEMA_VERSION = 8


def _keys_and_votes_as_rows(cur: Any) -> None:
    """Each review's delivery keys, and a history still kept in its document (written before version 4), move
    to rows: casting a vote then reads neither. A document that is not JSON is left for ``problems`` to name."""
    import orjson

    from .records import encode

    with_votes = {row[0] for row in cur.execute("SELECT DISTINCT review_key FROM review_votes").fetchall()}
    for key, text in cur.execute("SELECT key, doc FROM reviews").fetchall():
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(document, dict):
            continue
        history = document.pop("history", None)
        if key not in with_votes:  # stored before the history was kept: the current votes are all that is known
            for seq, vote in enumerate(document.get("votes") or [] if history is None else history):
                cur.execute("INSERT INTO review_votes (review_key, seq, vote) VALUES (%s, %s, %s)",
                            (key, seq, encode(vote)))
        for delivery_key in dict.fromkeys(document.pop("delivery_keys", None) or []):
            cur.execute("INSERT INTO review_keys (review_key, delivery_key) VALUES (%s, %s)", (key, delivery_key))
        cur.execute("UPDATE reviews SET doc = %s WHERE key = %s", (encode(document), key))


def _task_attempts_as_column(cur: Any) -> None:
    """Each pending task's attempts, kept in its document until now, copied to the column (a damaged document
    is left at 0 for ``problems`` to name)."""
    import orjson

    for task_id, text in cur.execute("SELECT id, doc FROM outbox").fetchall():
        try:
            attempts = orjson.loads(text).get("attempts")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if isinstance(attempts, int) and attempts > 0:
            cur.execute("UPDATE outbox SET attempts = %s WHERE id = %s", (attempts, task_id))


def _current_votes_as_rows(cur: Any) -> None:
    """Each review's current votes move from its document to ``review_ballots``, in their order: a vote then reads
    only its voters'. A document that is not JSON, or whose votes are not readable, keeps them: named when read."""
    import orjson

    from ..review_records import Vote
    from .records import encode
    from .sql_reviews import ballot_rows

    for key, text in cur.execute("SELECT key, doc FROM reviews").fetchall():
        try:
            document = orjson.loads(text)
            votes = [Vote.from_dict(vote) for vote in document.pop("votes", None) or []]
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            continue
        for ballot in ballot_rows(key, votes):
            cur.execute("INSERT INTO review_ballots VALUES (%s, %s, %s, %s, %s)", ballot)
        cur.execute("UPDATE reviews SET doc = %s WHERE key = %s", (encode(document), key))


#: version -> the statements (or steps, given the cursor) that bring the schema from version-1 to version.
MIGRATIONS: dict[int, list[str | Callable[[Any], None]]] = {
    1: [
        """CREATE TABLE runs (
            key text PRIMARY KEY,
            id text NOT NULL,
            loop text NOT NULL,
            status text NOT NULL,
            trigger text NOT NULL,
            created_at timestamptz NOT NULL,
            num bigint NOT NULL,
            archived boolean NOT NULL,
            doc text NOT NULL
        )""",
        "CREATE INDEX runs_hot ON runs (created_at, num) WHERE NOT archived",
        'CREATE INDEX runs_recent ON runs (created_at DESC, num DESC, id COLLATE "C" DESC) WHERE archived',
        "CREATE INDEX runs_trigger ON runs (trigger) WHERE NOT archived",
        """CREATE TABLE reviews (
            key text PRIMARY KEY,
            id text NOT NULL,
            run_key text NOT NULL,
            checkpoint_id text NOT NULL,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            num bigint NOT NULL,
            deadline timestamptz,
            archived boolean NOT NULL,
            doc text NOT NULL,
            lease_owner text,
            lease_until timestamptz
        )""",
        "CREATE INDEX reviews_hot ON reviews (status, created_at, num) WHERE NOT archived",
        "CREATE INDEX reviews_deadline ON reviews (deadline) WHERE deadline IS NOT NULL AND NOT archived",
        "CREATE INDEX reviews_run ON reviews (run_key)",
        "CREATE TABLE snapshots (run_key text PRIMARY KEY, data bytea NOT NULL, saved_at timestamptz NOT NULL)",
        "CREATE TABLE counters (prefix text PRIMARY KEY, last bigint NOT NULL)",
        """CREATE TABLE inbox (
            id text PRIMARY KEY,
            num bigint NOT NULL,
            kind text NOT NULL,
            payload text NOT NULL,
            created_at timestamptz NOT NULL,
            lease_owner text,
            lease_until timestamptz
        )""",
        """CREATE TABLE outbox (
            id text PRIMARY KEY,
            channel text NOT NULL,
            review_id text,
            created_at timestamptz NOT NULL,
            ready_at timestamptz NOT NULL,
            doc text NOT NULL,
            lease_owner text,
            lease_until timestamptz
        )""",
        "CREATE INDEX outbox_channel ON outbox (channel, ready_at)",
        "CREATE TABLE deliveries (digest text PRIMARY KEY, key text NOT NULL, at timestamptz NOT NULL)",
        """CREATE TABLE replicas (
            name text PRIMARY KEY,
            started_at timestamptz NOT NULL,
            heartbeat timestamptz NOT NULL,
            leader boolean NOT NULL DEFAULT false,
            info text NOT NULL DEFAULT '{}'
        )""",
    ],
    # a webhook's votes wait with their delivery until cast (Store.pending_deliveries)
    2: [
        "ALTER TABLE deliveries ADD COLUMN work text",
        "CREATE INDEX deliveries_pending ON deliveries (at) WHERE work IS NOT NULL",
    ],
    # which replica a run's claim belongs to: a claim cut off from a living replica is not taken from it
    3: [
        "CREATE TABLE run_owners (run_key text PRIMARY KEY, owner text NOT NULL, since timestamptz NOT NULL)",
    ],
    # a review's history as rows: a vote appends one instead of rewriting every vote before it
    4: [
        "CREATE TABLE review_votes (review_key text NOT NULL, seq bigint NOT NULL, vote text NOT NULL,"
        " PRIMARY KEY (review_key, seq))",
    ],
    # /metrics counts every run by loop and status (Store.run_counts) from this index, not from the rows' documents
    5: [
        "CREATE INDEX runs_loop_status ON runs (loop, status)",
    ],
    # a review's delivery keys as rows, unique per review: a vote's dedupe asks an index for its own key
    6: [
        "CREATE TABLE review_keys (review_key text NOT NULL, delivery_key text NOT NULL,"
        " PRIMARY KEY (review_key, delivery_key))",
        _keys_and_votes_as_rows,
    ],
    # the dashboard's failing deliveries come from this index, not from a scan of every pending task's document
    7: [
        "ALTER TABLE outbox ADD COLUMN attempts integer NOT NULL DEFAULT 0",
        _task_attempts_as_column,
        'CREATE INDEX outbox_failing ON outbox (created_at, id COLLATE "C") WHERE attempts > 0',
    ],
    # each person's current vote as a row (who, what it agrees with): a vote reads its voters' and the counts, not
    # every voter's vote in the document
    8: [
        'CREATE TABLE review_ballots (review_key text NOT NULL, who text NOT NULL, kind text COLLATE "C" NOT NULL,'
        " seq bigint NOT NULL, vote text NOT NULL, PRIMARY KEY (review_key, who))",
        "CREATE INDEX review_ballots_kind ON review_ballots (review_key, kind)",
        _current_votes_as_rows,
    ],
}
assert max(MIGRATIONS) == SCHEMA_VERSION


def advisory_key(schema: str, purpose: str) -> int:
    """A stable 64-bit advisory lock key for ``purpose`` in ``schema`` (bots in other schemas do not collide)."""
    digest = hashlib.sha256(f"loopbot:{schema}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


_HAS_TABLE = {
    "postgres": "SELECT to_regclass('loopbot_schema') IS NOT NULL",
    "sqlite": "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'loopbot_schema'",
}


def _recorded(cur: Any, engine: Any) -> tuple[int, str] | None:
    """(version, written_by) as recorded, None before the first migration; NewerFormatError past this loopbot's."""
    if not cur.execute(_HAS_TABLE[engine.name]).fetchone()[0]:
        return None
    row = cur.execute("SELECT version, written_by FROM loopbot_schema WHERE id = 1").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise NewerFormatError(
            f"{engine.where}: schema version {row[0]} (migrated by loopbot {row[1]}) is newer than this "
            f"loopbot reads (up to {SCHEMA_VERSION}); upgrade loopbot to use this database"
        )
    return None if row is None else (int(row[0]), str(row[1]))


def _bring_up(cur: Any, found: tuple[int, str] | None, written_by: str) -> tuple[int, int]:
    """Run the migrations past the recorded version inside the caller's transaction: (before, after)."""
    now = datetime.now(UTC)
    if found is None:
        cur.execute("CREATE TABLE loopbot_schema (id int PRIMARY KEY CHECK (id = 1), version int NOT NULL,"
                    " written_by text NOT NULL, migrated_at timestamptz NOT NULL)")
        cur.execute("INSERT INTO loopbot_schema VALUES (1, 0, %s, %s)", (written_by, now))
    before = 0 if found is None else found[0]
    for version in range(before + 1, SCHEMA_VERSION + 1):
        for step in MIGRATIONS[version]:
            if isinstance(step, str):
                cur.execute(step)
            else:
                step(cur)
    if before != SCHEMA_VERSION:
        cur.execute("UPDATE loopbot_schema SET version = %s, written_by = %s, migrated_at = %s WHERE id = 1",
                    (SCHEMA_VERSION, written_by, now))
    return before, SCHEMA_VERSION


def check(engine: Any) -> int:
    """The tables' schema version (0: none yet); NewerFormatError when a newer loopbot migrated them."""
    with engine.read() as cur:
        found = _recorded(cur, engine)
    return 0 if found is None else found[0]


def migrate(engine: Any, written_by: str) -> tuple[int, int]:
    """Bring the tables to ``SCHEMA_VERSION`` in one write transaction: (version before, version after).

    On PostgreSQL the transaction takes an advisory lock and creates the
    engine's schema first. On SQLite, up to date already, nothing is written
    (a read-only copy can still be read).
    """
    if engine.name == "sqlite" and check(engine) == SCHEMA_VERSION:
        return SCHEMA_VERSION, SCHEMA_VERSION
    with engine.write() as cur:  # asked again under the write lock: another process may have migrated meanwhile
        if engine.name == "postgres":
            from psycopg import sql

            cur.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key(engine.schema, "migrate"),))
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(engine.schema)))
        return _bring_up(cur, _recorded(cur, engine), written_by)


def prepare(engine: Any, migrate_tables: bool) -> None:
    """Migrate the tables on open, or (``migrate_tables=False``) refuse older ones, naming the command to run."""
    from bot import __version__

    if migrate_tables:
        migrate(engine, __version__)
    elif check(engine) < SCHEMA_VERSION:
        raise StoreError(f"{engine.where}: the tables are not there or older; run `loopbot migrate`")
