"""The store: one SQL implementation of the ``Store`` contract on SQLite (default) or PostgreSQL.

``SqliteStore`` keeps ``state_dir/loopbot.db``; ``PostgresStore`` a
PostgreSQL schema, for several ``serve`` replicas on one database: one class
over an engine (``engines``), the same tables (``sql_schema``), statements
and transactions. Records are kept as their JSON documents (``doc``) beside
the columns the queries need. ``update_*`` read the row ``FOR UPDATE`` (on
SQLite the write transaction serialises every writer of the file), so
concurrent updates from any thread, process or replica never lose one another.

On PostgreSQL, work that must happen once across replicas
(``decided_reviews``, ``due_reviews``, ``take_requests``, ``due_tasks``) is
leased to the asking replica (``owner``) for ``lease`` seconds. On SQLite
one ``serve`` owns a state dir (``serve.lock``): nothing is leased and
``claim_run`` always grants.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from ..review_records import REVIEW_FORMAT, Review
from .base import RUN_FORMAT, TASK_FORMAT, CorruptDocumentError, NewerFormatError, OutboxTask, Request, RunRecord
from .base import StoreError, UnknownTaskError, task_stem
from .engines import DB_NAME, BUSY_TIMEOUT, DatabaseError, Engine, Postgres, Sqlite, describe_url
from .records import check_name, checked_key, delivery_digest, encode, key_of, mutate_record, number, parse
from .sql_reviews import ReviewTables, locked_archived, review_rows, write_reviews
from .sql_runs import RunTables
from . import sql_schema

__all__ = ["SqlStore", "SqliteStore", "PostgresStore", "DatabaseError", "describe_url", "migrate_database",
           "LEASE_SECONDS"]

T = TypeVar("T")

#: How long work handed to a replica stays its own without it asking again.
LEASE_SECONDS = 60.0
_TASK_COLUMNS = ("id", "channel", "review_id", "created_at", "ready_at", "attempts", "doc")
_ADD_TASK = (f"INSERT INTO outbox ({', '.join(_TASK_COLUMNS)}) VALUES ({', '.join(f'%({c})s' for c in _TASK_COLUMNS)})"
             " ON CONFLICT (id) DO NOTHING")
_UPDATE_TASK = f"UPDATE outbox SET {', '.join(f'{c} = %({c})s' for c in _TASK_COLUMNS[1:])} WHERE id = %(id)s"


def migrate_database(url: str, schema: str = "loopbot") -> tuple[str, int, int]:
    """(where, version before, version after) of bringing ``schema`` to this loopbot's version."""
    from bot import __version__

    with contextlib.closing(Postgres(url, schema)) as engine:
        return (engine.where, *sql_schema.migrate(engine, __version__))


class SqlStore(RunTables, ReviewTables):
    """The ``Store`` on an engine; safe to share between threads, processes and (PostgreSQL) replicas."""

    def __init__(self, engine: Engine, *, owner: str | None = None, lease: float = LEASE_SECONDS,
                 clock: Callable[[], datetime] | None = None) -> None:
        self.engine = engine
        self.where = engine.where
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}"  # the host's name, as socket.gethostname()
        self.lease = timedelta(seconds=lease)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._damaged: dict[str, str] = {}  # "<table>/<key>" -> why, of rows a listing skipped
        self._scanned = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.where!r})"

    def close(self) -> None:
        self.engine.close()

    # -- plumbing -------------------------------------------------------------

    def _decode(self, table: str, key: str, text: str, supported: int, build: Callable[[dict[str, Any]], T],
                name_of: Callable[[str], str | None] = key_of,
                fill: Callable[[dict[str, Any]], None] | None = None) -> T:
        label = f"{self.where} {table}/{key}"
        document = parse(label, text, supported)
        check_name(label, key, document.get("id"), name_of)
        if fill is not None:
            fill(document)
        try:
            return build(document)
        except (KeyError, TypeError, ValueError, AttributeError, StoreError) as err:
            raise CorruptDocumentError(
                f"{label}: damaged document ({type(err).__name__}: {err}); restore it or delete the row"
            ) from err

    def _each(self, rows: list[Any], decode: Callable[[Any], T], table: str) -> list[T]:
        """``decode`` of every row a listing returned, skipping (and logging once) a damaged one: one bad row
        must not stop every tick. ``get_*`` of it still raises, naming it; ``problems()`` lists it."""
        found = []
        for row in rows:
            try:
                found.append(decode(row))
            except (CorruptDocumentError, NewerFormatError) as err:
                self._skip(f"{table}/{row[0]}", err)
        return found

    def _skip(self, label: str, err: Exception) -> None:
        if label not in self._damaged:
            import logging  # only for a damaged row: listing loads no logging

            logging.getLogger(__name__).error("%s; skipped until it is repaired, the others go on", err)
        self._damaged[label] = str(err)

    def _task(self, row: tuple[Any, ...]) -> OutboxTask:
        return self._decode("outbox", row[0], row[1], TASK_FORMAT, OutboxTask.from_dict, task_stem)

    def _leased(self, table: str, columns: str, condition: str, params: dict[str, Any], order: str = "",
                limit: int | None = None) -> list[Any]:
        """Rows of ``table`` matching ``condition``; on PostgreSQL only those free, expired or this owner's,
        leased to this owner (``FOR UPDATE SKIP LOCKED``: replicas asking together get different rows)."""
        tail = "" if limit is None else f" LIMIT {int(limit)}"
        if not self.engine.leases:
            with self.engine.read() as cur:
                cur.execute(f"SELECT {columns} FROM {table} WHERE {condition}"
                            f"{' ORDER BY ' + order if order else ''}{tail}", params)
                return list(cur.fetchall())
        params = {**params, "owner": self.owner, "lease": self.lease}
        key = "key" if table == "reviews" else "id"
        returning = ", ".join(f"t.{c.strip()}" for c in columns.split(","))
        with self.engine.write_one() as cur:
            cur.execute(
                f"WITH free AS (SELECT {key} FROM {table} WHERE {condition}"
                " AND (lease_owner IS NULL OR lease_owner = %(owner)s OR lease_until < now())"
                f"{' ORDER BY ' + order if order and limit is not None else ''}{tail} FOR UPDATE SKIP LOCKED)"
                f" UPDATE {table} t SET lease_owner = %(owner)s, lease_until = now() + %(lease)s"
                f" FROM free WHERE t.{key} = free.{key} RETURNING {returning}",
                params,
            )
            return list(cur.fetchall())

    # -- runs and reviews together ---------------------------------------------

    def put_run(self, run: RunRecord) -> None:
        self.put_records([run], [])

    def put_review(self, review: Review) -> None:
        self.put_records([], [review])

    def put_records(self, runs: list[RunRecord], reviews: list[Review]) -> None:
        """Runs and reviews as they are, all in one transaction (import, upgrade): one commit, not thousands."""
        with self.engine.write() as cur:
            for run in runs:
                self._write_run(cur, run, locked_archived(cur, "runs", checked_key("run", run.id)))
            write_reviews(cur, [review_rows(review, locked_archived(cur, "reviews", checked_key("review", review.id)))
                                for review in reviews])

    # -- ids and the inbox ----------------------------------------------------

    @staticmethod
    def _next_number(cur: Any, prefix_key: str) -> int:
        cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, 1)"
                    " ON CONFLICT (prefix) DO UPDATE SET last = counters.last + 1 RETURNING last", (prefix_key,))
        return int(cur.fetchone()[0])

    def next_id(self, prefix: str) -> str:
        """``<prefix>-<n>``, counted in the database: never the same twice, across every process."""
        with self.engine.write_one() as cur:
            return f"{prefix}-{self._next_number(cur, checked_key('counters', prefix))}"

    def counters(self) -> dict[str, int]:
        with self.engine.read() as cur:
            cur.execute("SELECT prefix, last FROM counters ORDER BY prefix")
            return {prefix: int(last) for prefix, last in cur.fetchall()}

    def raise_counter(self, prefix: str, last: int) -> None:
        """Make ``prefix``'s counter at least ``last`` (import: never hand out an id already used)."""
        with self.engine.write_one() as cur:
            cur.execute("INSERT INTO counters (prefix, last) VALUES (%s, %s) ON CONFLICT (prefix) DO UPDATE SET"
                        " last = CASE WHEN excluded.last > counters.last THEN excluded.last ELSE counters.last END",
                        (checked_key("counters", prefix), last))

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str:
        with self.engine.write() as cur:
            request_id = f"request-{self._next_number(cur, 'request')}"
            self._put_request(cur, Request(request_id, kind, payload))
        return request_id

    def put_request(self, request: Request) -> None:
        """Store a request under its own id (import)."""
        with self.engine.write_one() as cur:
            self._put_request(cur, request)

    def _put_request(self, cur: Any, request: Request) -> None:
        row = (checked_key("request", request.id), number(request.id), request.kind, encode(request.payload),
               request.created_at or self._clock())
        cur.execute("INSERT INTO inbox (id, num, kind, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
                    " ON CONFLICT (id) DO NOTHING", row)

    def take_requests(self) -> list[Request]:
        """Pending requests, oldest first (on PostgreSQL: free, expired or this replica's, leased to it)."""
        return self._requests(self._leased("inbox", "id, num, kind, payload, created_at", "true", {}))

    def pending_requests(self) -> list[Request]:
        """Every pending request, oldest first, whoever holds it, leasing none (export: a replica keeps its own)."""
        with self.engine.read() as cur:
            return self._requests(cur.execute("SELECT id, num, kind, payload, created_at FROM inbox").fetchall())

    def _requests(self, rows: list[Any]) -> list[Request]:
        requests = []
        for request_id, _, kind, payload, created_at in sorted(rows, key=lambda r: (r[1], r[0])):
            try:
                data = json.loads(payload)
                if not isinstance(data, dict):
                    raise TypeError("payload must be an object")
            except (ValueError, TypeError) as err:
                why = f"{self.where} inbox/{request_id}: damaged payload ({err}); delete the row"
                self._skip(f"inbox/{request_id}", CorruptDocumentError(why))
                continue
            requests.append(Request(request_id, kind, data, self.engine.time(created_at)))
        return requests

    def finish_request(self, request_id: str) -> None:
        key = checked_key("request", request_id)
        with self.engine.write_one() as cur:
            cur.execute("DELETE FROM inbox WHERE id = %s", (key,))

    # -- outbox -----------------------------------------------------------------

    @staticmethod
    def _task_columns(task: OutboxTask) -> dict[str, Any]:
        return {"id": task.id, "channel": task.channel, "review_id": task.review_id, "created_at": task.created_at,
                "ready_at": task.ready_at, "attempts": task.attempts, "doc": encode(task.to_dict())}

    def add_task(self, task: OutboxTask) -> bool:
        """Store a new task; False (and no write) if a pending task has this id."""
        with self.engine.write_one() as cur:
            cur.execute(_ADD_TASK + " RETURNING id", self._task_columns(task))
            return cur.fetchone() is not None

    def due_tasks(self, channel: str, now: datetime, limit: int = 50) -> list[OutboxTask]:
        """Ready tasks of ``channel``, oldest first (on PostgreSQL leased, so one replica delivers each)."""
        if limit <= 0:
            return []
        rows = self._leased("outbox", "id, doc, created_at", "channel = %(channel)s AND ready_at <= %(now)s",
                            {"channel": channel, "now": now}, 'created_at, id COLLATE "C"', limit)
        rows.sort(key=lambda row: (self.engine.time(row[2]), row[0]))
        return self._each(rows, self._task, "outbox")

    def next_task_at(self, channel: str) -> datetime | None:
        with self.engine.read() as cur:
            return self.engine.time(cur.execute("SELECT min(ready_at) FROM outbox WHERE channel = %s",
                                                (channel,)).fetchone()[0])

    def pending_tasks(self, review_id: str | None = None) -> list[OutboxTask]:
        with self.engine.read() as cur:
            cur.execute("SELECT id, doc FROM outbox WHERE %(review)s::text IS NULL OR review_id = %(review)s"
                        ' ORDER BY created_at, id COLLATE "C"', {"review": review_id})
            return self._each(cur.fetchall(), self._task, "outbox")

    def failing_tasks(self, limit: int) -> tuple[list[OutboxTask], int]:
        """The oldest ``limit`` pending tasks that have failed at least once, and how many such tasks there are:
        from the ``outbox_failing`` index, so a backlog of tasks not tried yet costs nothing here."""
        with self.engine.read() as cur:
            if limit <= 0:
                return [], int(cur.execute("SELECT count(*) FROM outbox WHERE attempts > 0").fetchone()[0])
            rows = cur.execute("SELECT id, doc, count(*) OVER () FROM outbox WHERE attempts > 0"
                               ' ORDER BY created_at, id COLLATE "C" LIMIT %s', (limit,)).fetchall()
        return self._each(rows, self._task, "outbox"), int(rows[0][2]) if rows else 0

    def update_task(self, task_id: str, mutate: Callable[[OutboxTask], T]) -> T:
        with self.engine.write() as cur:
            row = cur.execute("SELECT id, doc FROM outbox WHERE id = %s FOR UPDATE", (task_id,)).fetchone()
            if row is None:
                raise UnknownTaskError(task_id)
            task = self._task(row)
            return mutate_record("task", task_id, task_id, task, mutate,
                                 lambda: cur.execute(_UPDATE_TASK, self._task_columns(task)), task_stem)

    def finish_tasks(self, task_ids: Sequence[str]) -> None:
        for task_id in task_ids:
            if task_stem(task_id) is None:
                raise StoreError(f"invalid task id {task_id!r}")
        with self.engine.write_one() if len(task_ids) == 1 else self.engine.write() as cur:
            for task_id in task_ids:
                cur.execute("DELETE FROM outbox WHERE id = %s", (task_id,))

    # -- deliveries and health ------------------------------------------------

    def record_deliveries(self, batch: Sequence[tuple[str, list[dict[str, Any]] | None]]) -> list[bool]:
        """In one transaction and one round trip; rows in digest order, so replicas never deadlock (see Store)."""
        digests = [delivery_digest(key) for key, _work in batch]
        order = sorted(range(len(batch)), key=digests.__getitem__)
        inserts = [("INSERT INTO deliveries (digest, key, at, work) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (digest) DO NOTHING RETURNING digest",
                    (digests[i], batch[i][0].encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0"),
                     self._clock(), None if batch[i][1] is None else json.dumps(batch[i][1]))) for i in order]
        new = [False] * len(batch)
        with self.engine.write_one() if len(batch) == 1 else self.engine.write() as cur:
            for i, rows in zip(order, cur.fetch_each(inserts), strict=True):
                new[i] = bool(rows)
        return new

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        with self.engine.read() as cur:
            cur.execute("SELECT key, work FROM deliveries WHERE work IS NOT NULL ORDER BY at, digest")
            return [(key, json.loads(work)) for key, work in cur.fetchall()]

    def finish_deliveries(self, keys: Sequence[str], answers: Sequence[OutboxTask] = ()) -> None:
        with self.engine.write() as cur:
            for task in answers:
                cur.execute(_ADD_TASK, self._task_columns(task))
            for key in keys:
                cur.execute("UPDATE deliveries SET work = NULL WHERE digest = %s AND work IS NOT NULL",
                            (delivery_digest(key),))

    def deliveries(self) -> list[tuple[str, str, datetime]]:
        """(digest, key, when) of every delivery whose work is done (export)."""
        with self.engine.read() as cur:
            cur.execute("SELECT digest, key, at FROM deliveries WHERE work IS NULL ORDER BY digest")
            return [(d, k, self.engine.time(at)) for d, k, at in cur.fetchall()]

    def put_delivery(self, digest: str, key: str, at: datetime) -> None:
        with self.engine.write_one() as cur:
            cur.execute("INSERT INTO deliveries (digest, key, at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        (digest, key, at))

    def problems(self) -> list[str]:
        """'<table>/<key>: why' of every damaged row a listing skipped. On SQLite the first call also finds the
        hot set's damaged rows nothing has read yet (one query a table); an archived one is named when read."""
        if not self._scanned and self.engine.name == "sqlite":
            self._scanned = True
            self._scan()
        return [f"{label}: {why}" for label, why in sorted(self._damaged.items())]

    def _scan(self) -> None:
        bad = ("CASE WHEN json_valid(doc) THEN json_type(doc, '$.format') IS NOT 'integer'"
               " OR json_extract(doc, '$.format') > %s ELSE 1 END")
        checks = [("runs", "key", "NOT archived AND", RUN_FORMAT, self._run),
                  ("reviews", "key", "NOT archived AND", REVIEW_FORMAT, lambda row: self._with_rows(row, "[]", [])),
                  ("outbox", "id", "", TASK_FORMAT, self._task)]
        with self.engine.read() as cur:
            for table, key, hot, supported, decode in checks:
                self._each(cur.execute(f"SELECT {key}, doc FROM {table} WHERE {hot} {bad}", (supported,)).fetchall(),
                           decode, table)
            damaged = cur.execute("SELECT id FROM inbox WHERE NOT json_valid(payload)").fetchall()
        if damaged:
            self.take_requests()  # names each one


class SqliteStore(SqlStore):
    """The embedded store: ``state_dir/loopbot.db``, created and migrated on open (see ``engines.Sqlite``)."""

    def __init__(self, state_dir: str | os.PathLike[str], *, migrate: bool = True,
                 busy_timeout: float = BUSY_TIMEOUT, clock: Callable[[], datetime] | None = None) -> None:
        self.root = Path(state_dir)
        super().__init__(Sqlite(self.root / DB_NAME, busy_timeout=busy_timeout), clock=clock)
        sql_schema.prepare(self.engine, migrate)


class PostgresStore(SqlStore):
    """The store on a PostgreSQL schema, for replicas. With ``migrate=False`` an unmigrated database is refused
    with the command to run; one a newer loopbot migrated is refused either way."""

    def __init__(self, url: str, *, schema: str = "loopbot", migrate: bool = True, owner: str | None = None,
                 lease: float = LEASE_SECONDS, clock: Callable[[], datetime] | None = None) -> None:
        if not isinstance(schema, str) or not schema or not schema.replace("_", "a").isalnum() or not schema.islower():
            raise StoreError(f"invalid schema name {schema!r}: use lower-case letters, digits and '_'")
        self.url, self.schema = url, schema
        super().__init__(Postgres(url, schema), owner=owner, lease=lease, clock=clock)
        sql_schema.prepare(self.engine, migrate)
