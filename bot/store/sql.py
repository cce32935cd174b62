"""PostgresStore: the ``Store`` on PostgreSQL, for several ``loopbot serve`` replicas on one database.

Chosen by ``store: {url: postgresql://...}`` in the config. Tables live in
one PostgreSQL schema (``store.schema``, default ``loopbot``), created and
migrated by the bot (``sql_schema``). Records are kept as the same JSON
documents the directory store writes (``doc``), beside the columns its
queries need; every write is committed before the method returns (with
PostgreSQL's default ``synchronous_commit``, flushed to the WAL).

``update_*(id, mutate)`` is ``SELECT ... FOR UPDATE`` and the write in one
transaction: concurrent updates of one record, from any thread, process or
replica, are serialised by the row lock.

Work that must happen once across replicas is leased to the asking replica
(``owner``, host:pid by default) when it is handed out: ``decided_reviews``,
``due_reviews``, ``take_requests`` and ``due_tasks`` return only what is
free, expired or already this owner's, and lease it (``FOR UPDATE SKIP
LOCKED``) for ``lease`` seconds. An owner that keeps asking keeps its
leases; one that died loses them after ``lease`` seconds and another
replica takes the work over. With one replica this is invisible: the owner
sees everything, as the contract says.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import orjson

from adapters.suggest import did_you_mean
from loop_engine.errors import CorruptStateError
from loop_engine.serialization import encode_state, state_from_dict
from loop_engine.types import LoopState

from ..reviews import REVIEW_FORMAT, Cast, Review, VoteResult, next_deadline
from .base import (
    ACTIVE_RUN_STATUSES,
    HOT_REVIEW_STATUSES,
    RUN_FORMAT,
    TASK_FORMAT,
    Claim,
    CorruptDocumentError,
    OutboxTask,
    Request,
    RunRecord,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
    UnknownTaskError,
    cast_each,
    posted_at,
)
from .collection import number
from .documents import check_name, file_name, parse
from .files import _FEW_IDS, _one_edit, _run_key
from .outbox import task_stem
from .snapshots import SNAPSHOT_FORMAT, SnapshotFiles
from . import sql_schema

__all__ = ["PostgresStore", "DatabaseError", "describe_url", "migrate_database", "LEASE_SECONDS"]

T = TypeVar("T")

#: How long work handed to a replica stays its own without it asking again.
LEASE_SECONDS = 60.0
_ORDER = 'created_at, num, id COLLATE "C"'


class DatabaseError(StoreError, OSError):
    """The database cannot be reached or refused a statement; an OSError, like a failing disk."""


def describe_url(url: str, schema: str | None = None) -> str:
    """``postgresql://user@host:port/db`` without the password (for messages and logs)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL libpq cannot parse is still named, minus what could be secret
        return "postgresql://(unparsable URL)"
    host = str(info.get("host") or "localhost")
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    where = f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"
    return where if schema is None else f"{where} (schema {schema})"


def migrate_database(url: str, schema: str = "loopbot") -> tuple[str, int, int]:
    """(where, version before, version after) of bringing ``schema`` to this loopbot's version."""
    import psycopg

    from bot import __version__

    where = describe_url(url, schema)
    try:
        with psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}", connect_timeout=10) as conn:
            before, after = sql_schema.migrate(conn, schema, where, __version__)
    except psycopg.Error as err:
        raise DatabaseError(f"{where}: {type(err).__name__}: {str(err).strip()}") from err
    return where, before, after


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _dumps(document: dict[str, Any]) -> str:
    """JSON text (ASCII: lone surrogates and NULs survive a text column)."""
    return json.dumps(document, sort_keys=True)


def _ended_run(run: RunRecord) -> bool:
    return run.status not in ACTIVE_RUN_STATUSES


def _ended_review(review: Review) -> bool:
    return review.status not in HOT_REVIEW_STATUSES


class _Pool:
    """A few idle connections reused across threads (each call takes one; a broken one is dropped)."""

    def __init__(self, connect: Callable[[], Any], keep: int = 8) -> None:
        self._connect = connect
        self._keep = keep
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        from psycopg.pq import TransactionStatus

        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            reusable = not conn.closed and not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE
            with self._lock:
                if reusable and len(self._idle) < self._keep:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class PostgresStore:
    """The ``Store`` on a PostgreSQL schema; safe to share between threads, processes and replicas.

    ``migrate`` (default) creates or upgrades the tables on open; with
    ``migrate=False`` an unmigrated database is refused with the command to
    run. A database migrated by a newer loopbot is refused either way.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "loopbot",
        migrate: bool = True,
        owner: str | None = None,
        lease: float = LEASE_SECONDS,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not isinstance(schema, str) or not schema or not schema.replace("_", "a").isalnum() or not schema.islower():
            raise StoreError(f"invalid schema name {schema!r}: use lower-case letters, digits and '_'")
        self.url = url
        self.schema = schema
        self.owner = owner or _owner()
        self.lease = timedelta(seconds=lease)
        self.where = describe_url(url, schema)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._pool = _Pool(self._connect)
        with self._errors(), self._pool.connection() as conn:
            if migrate:
                from bot import __version__

                sql_schema.migrate(conn, schema, self.where, __version__)
            elif sql_schema.check_schema(conn, self.where) < sql_schema.SCHEMA_VERSION:
                raise StoreError(f"{self.where}: the tables are not there or older; run `loopbot migrate`")

    def __repr__(self) -> str:
        return f"PostgresStore({self.where!r})"

    def close(self) -> None:
        self._pool.close()

    # -- plumbing -------------------------------------------------------------

    def _connect(self) -> Any:
        import psycopg

        return psycopg.connect(
            self.url, autocommit=True, options=f"-c search_path={self.schema} -c timezone=UTC", connect_timeout=10
        )

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.Error as err:
            raise DatabaseError(f"{self.where}: {type(err).__name__}: {str(err).strip()}") from err

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """A cursor in a transaction, committed when the block ends (rolled back on an error)."""
        with self._errors(), self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    @contextlib.contextmanager
    def _cur(self) -> Iterator[Any]:
        """A cursor in autocommit: each statement commits by itself."""
        with self._errors(), self._pool.connection() as conn, conn.cursor() as cur:
            yield cur

    def _decode(self, table: str, key: str, text: str, supported: int, build: Callable[[dict[str, Any]], T],
                name_of: Callable[[str], str | None] = file_name) -> T:
        label = Path(f"{self.where} {table}/{key}")
        document = parse(label, text.encode("utf-8", "surrogatepass"), supported)
        check_name(label, document.get("id"), name_of)
        try:
            return build(document)
        except (KeyError, TypeError, ValueError, AttributeError, StoreError) as err:
            raise CorruptDocumentError(
                f"{label}: damaged document ({type(err).__name__}: {err}); restore it or delete the row"
            ) from err

    def _run(self, row: tuple[Any, ...]) -> RunRecord:
        return self._decode("runs", row[0], row[1], RUN_FORMAT, RunRecord.from_dict)

    def _review(self, row: tuple[Any, ...]) -> Review:
        return self._decode("reviews", row[0], row[1], REVIEW_FORMAT, Review.from_dict)

    def _task(self, row: tuple[Any, ...]) -> OutboxTask:
        return self._decode("outbox", row[0], row[1], TASK_FORMAT, OutboxTask.from_dict, task_stem)

    @staticmethod
    def _key(noun: str, doc_id: str) -> str:
        key = file_name(doc_id)
        if key is None:
            raise StoreError(f"invalid {noun} id {doc_id!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)")
        return key

    # -- runs -------------------------------------------------------------

    def _unknown_run(self, run_id: str) -> UnknownRunError:
        if file_name(run_id) is None:
            return UnknownRunError(f"no run {run_id!r}: run ids look like demo-run-3")
        return UnknownRunError(f"no run {run_id!r} in {self.where}; `loopbot status` lists the runs")

    def _run_columns(self, run: RunRecord) -> dict[str, Any]:
        return {
            "key": self._key("run", run.id), "id": run.id, "loop": run.loop, "status": run.status,
            "trigger": run.trigger, "created_at": run.created_at, "num": number(run.id),
            "archived": _ended_run(run), "doc": _dumps(run.to_dict()),
        }

    def _write_run(self, cur: Any, run: RunRecord, was_archived: bool | None) -> None:
        if was_archived and not _ended_run(run):
            raise StoreError(
                f"run {run.id} has ended and is archived; it cannot become {run.status!r} again - start a new one"
            )
        cur.execute(
            "INSERT INTO runs (key, id, loop, status, trigger, created_at, num, archived, doc)"
            " VALUES (%(key)s, %(id)s, %(loop)s, %(status)s, %(trigger)s, %(created_at)s, %(num)s, %(archived)s,"
            " %(doc)s) ON CONFLICT (key) DO UPDATE SET id = excluded.id, loop = excluded.loop,"
            " status = excluded.status, trigger = excluded.trigger, created_at = excluded.created_at,"
            " num = excluded.num, archived = excluded.archived, doc = excluded.doc",
            self._run_columns(run),
        )

    def put_run(self, run: RunRecord) -> None:
        key = self._key("run", run.id)
        with self._tx() as cur:
            cur.execute("SELECT archived FROM runs WHERE key = %s FOR UPDATE", (key,))
            row = cur.fetchone()
            self._write_run(cur, run, None if row is None else row[0])

    def get_run(self, run_id: str) -> RunRecord:
        key = file_name(run_id)
        if key is None:
            raise self._unknown_run(run_id)
        with self._cur() as cur:
            cur.execute("SELECT key, doc FROM runs WHERE key = %s", (key,))
            row = cur.fetchone()
        if row is None:
            raise self._unknown_run(run_id)
        return self._run(row)

    def _runs_where(self, where: str, params: tuple[Any, ...] = (), tail: str = "") -> list[RunRecord]:
        with self._cur() as cur:
            cur.execute(f"SELECT key, doc FROM runs WHERE {where} ORDER BY {_ORDER} {tail}", params)
            return [self._run(row) for row in cur.fetchall()]

    def list_runs(self, *, archived: bool = False) -> list[RunRecord]:
        return self._runs_where("true" if archived else "NOT archived")

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T:
        """Change a run under its row lock; a run that ends is archived by the same transaction."""
        key = file_name(run_id)
        if key is None:
            raise self._unknown_run(run_id)
        with self._tx() as cur:
            cur.execute("SELECT key, doc, archived FROM runs WHERE key = %s FOR UPDATE", (key,))
            row = cur.fetchone()
            if row is None:
                raise self._unknown_run(run_id)
            run = self._run(row)
            before = run.to_dict()
            result = mutate(run)
            if run.to_dict() != before:
                if file_name(run.id) != key:
                    raise StoreError(f"run {run_id}: an update may not change its id to {run.id!r}")
                self._write_run(cur, run, row[2])
        return result

    def recent_runs(self, limit: int = 10) -> list[RunRecord]:
        """The ``limit`` latest-created ended runs, oldest first."""
        if limit <= 0:
            return []
        with self._cur() as cur:
            cur.execute(
                'SELECT key, doc FROM runs WHERE archived ORDER BY created_at DESC, num DESC, id COLLATE "C" DESC'
                " LIMIT %s",
                (limit,),
            )
            return [self._run(row) for row in reversed(cur.fetchall())]

    def active_runs(self) -> list[RunRecord]:
        return self._runs_where("NOT archived AND status = ANY(%s)", (list(ACTIVE_RUN_STATUSES),))

    def active_run(self, loop: str) -> RunRecord | None:
        found = self._runs_where("NOT archived AND status = ANY(%s) AND loop = %s",
                                 (list(ACTIVE_RUN_STATUSES), loop), "LIMIT 1")
        return found[0] if found else None

    def run_with_trigger(self, trigger: str) -> RunRecord | None:
        with self._cur() as cur:
            cur.execute(
                'SELECT key, doc FROM runs WHERE NOT archived AND trigger = %s'
                ' ORDER BY created_at DESC, num DESC, id COLLATE "C" DESC LIMIT 1',
                (trigger,),
            )
            row = cur.fetchone()
        return None if row is None else self._run(row)

    def claim_run(self, run_id: str) -> Claim | None:
        """An advisory lock on the run held by a session of its own (``sql_leader.claim_run``): a replica
        that dies, or whose session is cut, frees it at once."""
        from .sql_leader import claim_run

        return claim_run(self, run_id)

    # -- snapshots ----------------------------------------------------------

    def _save_snapshot_bytes(self, run_id: str, data: bytes) -> None:
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO snapshots (run_key, data, saved_at) VALUES (%s, %s, now())"
                " ON CONFLICT (run_key) DO UPDATE SET data = excluded.data, saved_at = excluded.saved_at",
                (self._key("run", run_id), data),
            )

    def save_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None:
        self._key("run", run_id)
        self._save_snapshot_bytes(run_id, orjson.dumps({"format": 1, "run_id": run_id, "snapshot": snapshot}))

    def save_state(self, run_id: str, state: LoopState) -> None:
        """The engine's own encoding, wrapped as the directory store wraps it (NotJSONSerialisableError first)."""
        self._key("run", run_id)
        engine = encode_state(state)
        head = b'{"format":%d,"run_id":%b,"engine":' % (SNAPSHOT_FORMAT, orjson.dumps(run_id))
        self._save_snapshot_bytes(run_id, head + engine + b"}")

    def _snapshot(self, run_id: str) -> tuple[Path, dict[str, Any]] | None:
        key = self._key("run", run_id)
        with self._cur() as cur:
            cur.execute("SELECT data FROM snapshots WHERE run_key = %s", (key,))
            row = cur.fetchone()
        if row is None:
            return None
        label = Path(f"{self.where} snapshots/{key}")
        return label, parse(label, bytes(row[0]), SNAPSHOT_FORMAT)

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None:
        found = self._snapshot(run_id)
        return None if found is None else SnapshotFiles._engine_state(*found)

    def load_state(self, run_id: str) -> LoopState | None:
        found = self._snapshot(run_id)
        if found is None:
            return None
        try:
            return state_from_dict(SnapshotFiles._engine_state(*found))
        except CorruptStateError as err:
            raise CorruptDocumentError(f"{found[0]}: {err}; restore it or delete the row") from err

    def snapshot_bytes(self, run_id: str) -> bytes | None:
        """The stored snapshot document as it is (for ``loopbot export``)."""
        key = self._key("run", run_id)
        with self._cur() as cur:
            cur.execute("SELECT data FROM snapshots WHERE run_key = %s", (key,))
            row = cur.fetchone()
        return None if row is None else bytes(row[0])

    def snapshot_ids(self) -> list[str]:
        with self._cur() as cur:
            cur.execute("SELECT run_key FROM snapshots ORDER BY run_key")
            return [row[0] for row in cur.fetchall()]

    # -- reviews ------------------------------------------------------------

    def _unknown_review(self, review_id: str) -> UnknownReviewError:
        close = self._close_review_ids(review_id)
        hint = did_you_mean(review_id, close, n=3) or "; `loopbot status` lists the open reviews"
        return UnknownReviewError(f"no review {review_id!r}{hint}", close)

    def _close_review_ids(self, review_id: str) -> list[str]:
        with self._cur() as cur:
            cur.execute("SELECT count(*) FROM reviews")
            if cur.fetchone()[0] <= _FEW_IDS:
                cur.execute("SELECT key FROM reviews")
            else:
                cur.execute("SELECT key FROM reviews WHERE key = ANY(%s)",
                            (sorted(_one_edit(review_id.strip().lower())),))
            return [row[0] for row in cur.fetchall()]

    def _write_review(self, cur: Any, review: Review, was_archived: bool | None) -> None:
        ended = _ended_review(review)
        if was_archived and not ended:
            raise StoreError(
                f"review {review.id} has ended and is archived; it cannot become {review.status!r} again"
                " - start a new one"
            )
        cur.execute(
            "INSERT INTO reviews (key, id, run_key, checkpoint_id, status, created_at, num, deadline, archived, doc)"
            " VALUES (%(key)s, %(id)s, %(run_key)s, %(checkpoint_id)s, %(status)s, %(created_at)s, %(num)s,"
            " %(deadline)s, %(archived)s, %(doc)s) ON CONFLICT (key) DO UPDATE SET id = excluded.id,"
            " run_key = excluded.run_key, checkpoint_id = excluded.checkpoint_id, status = excluded.status,"
            " created_at = excluded.created_at, num = excluded.num, deadline = excluded.deadline,"
            " archived = excluded.archived, doc = excluded.doc",
            {
                "key": self._key("review", review.id), "id": review.id, "run_key": _run_key(review.run_id),
                "checkpoint_id": review.checkpoint_id, "status": review.status, "created_at": review.created_at,
                "num": number(review.id), "deadline": None if ended else next_deadline(review),
                "archived": ended, "doc": _dumps(review.to_dict()),
            },
        )

    def put_review(self, review: Review) -> None:
        key = self._key("review", review.id)
        with self._tx() as cur:
            cur.execute("SELECT archived FROM reviews WHERE key = %s FOR UPDATE", (key,))
            row = cur.fetchone()
            self._write_review(cur, review, None if row is None else row[0])

    def get_review(self, review_id: str) -> Review:
        key = file_name(review_id)
        row = None
        if key is not None:
            with self._cur() as cur:
                cur.execute("SELECT key, doc FROM reviews WHERE key = %s", (key,))
                row = cur.fetchone()
        if row is None:
            raise self._unknown_review(review_id)
        return self._review(row)

    def _reviews_where(self, where: str, params: tuple[Any, ...] | dict[str, Any] = (), tail: str = "") -> list[Review]:
        with self._cur() as cur:
            cur.execute(f"SELECT key, doc FROM reviews WHERE {where} ORDER BY {_ORDER} {tail}", params)
            return [self._review(row) for row in cur.fetchall()]

    def list_reviews(self, *, archived: bool = False) -> list[Review]:
        return self._reviews_where("true" if archived else "NOT archived")

    def peek_review(self, review_id: str) -> Review:
        return self.get_review(review_id)

    def cast_votes(self, batch: Mapping[str, Sequence[Cast]]) -> dict[str, list[VoteResult] | Exception]:
        return cast_each(self, batch)

    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T:
        """Change a review under its row lock; one that becomes applied or failed is archived by the same write."""
        key = file_name(review_id)
        found = False
        if key is not None:
            with self._tx() as cur:
                cur.execute("SELECT key, doc, archived FROM reviews WHERE key = %s FOR UPDATE", (key,))
                row = cur.fetchone()
                if row is not None:
                    found = True
                    review = self._review(row)
                    before = review.to_dict()
                    result = mutate(review)
                    if review.to_dict() != before:
                        if file_name(review.id) != key:
                            raise StoreError(f"review {review_id}: an update may not change its id to {review.id!r}")
                        self._write_review(cur, review, row[2])
        if not found:
            raise self._unknown_review(review_id)
        return result

    def _leased_reviews(self, condition: str, params: dict[str, Any]) -> list[Review]:
        """Hot reviews matching ``condition`` that are free, expired or this owner's, leased to this owner."""
        params = {**params, "owner": self.owner, "lease": self.lease}
        with self._cur() as cur:
            cur.execute(
                "WITH free AS (SELECT key FROM reviews WHERE NOT archived AND " + condition +
                " AND (lease_owner IS NULL OR lease_owner = %(owner)s OR lease_until < now())"
                " FOR UPDATE SKIP LOCKED)"
                " UPDATE reviews r SET lease_owner = %(owner)s, lease_until = now() + %(lease)s"
                " FROM free WHERE r.key = free.key RETURNING r.key, r.doc, r.created_at, r.num, r.id",
                params,
            )
            rows = cur.fetchall()
        rows.sort(key=lambda row: (row[2], row[3], row[4]))
        return [self._review(row) for row in rows]

    def open_reviews(self, limit: int | None = None) -> list[Review]:
        tail = "" if limit is None else f"LIMIT {max(int(limit), 0)}"
        return self._reviews_where("NOT archived AND status = 'open'", (), tail)

    def open_reviews_posted_at(self, channel: str, context: Mapping[str, Any]) -> list[Review]:
        """jsonb containment picks the rows; the same check as the directory store's confirms each."""
        wanted = json.dumps([{"channel": channel, "data": dict(context)}])
        found = self._reviews_where("NOT archived AND status = 'open' AND (doc::jsonb -> 'posts') @> %s::jsonb",
                                    (wanted,), "")
        return [review for review in found if posted_at(review, channel, context)]

    def decided_reviews(self) -> list[Review]:
        """Decided reviews to apply, leased to this replica (so one replica applies each)."""
        return self._leased_reviews("status = 'decided'", {})

    def due_reviews(self, now: datetime) -> list[Review]:
        """Open reviews with a deadline due at ``now``, leased to this replica."""
        return self._leased_reviews("deadline <= %(now)s", {"now": now})

    def next_deadline(self) -> datetime | None:
        with self._cur() as cur:
            cur.execute("SELECT min(deadline) FROM reviews WHERE NOT archived")
            value: datetime | None = cur.fetchone()[0]
        return value

    def review_for_run(self, run_id: str, checkpoint_id: str | None = None) -> Review | None:
        with self._cur() as cur:
            cur.execute(
                "SELECT key, doc FROM reviews WHERE run_key = %(run)s"
                " AND (%(cp)s::text IS NULL OR checkpoint_id = %(cp)s)"
                ' ORDER BY created_at DESC, num DESC, id COLLATE "C" DESC LIMIT 1',
                {"run": _run_key(run_id), "cp": checkpoint_id},
            )
            row = cur.fetchone()
        return None if row is None else self._review(row)

    def counts(self) -> dict[str, Any]:
        with self._cur() as cur:
            cur.execute("SELECT status, count(*) FROM runs WHERE NOT archived GROUP BY status ORDER BY status")
            runs = {status: int(n) for status, n in cur.fetchall()}
            cur.execute("SELECT status, count(*) FROM reviews WHERE NOT archived GROUP BY status")
            reviews = {status: int(n) for status, n in cur.fetchall()}
            cur.execute("SELECT count(*) FROM outbox")
            pending = int(cur.fetchone()[0])
        return {
            "runs": runs,
            "open_reviews": reviews.get("open", 0),
            "decided_reviews": reviews.get("decided", 0),
            "outbox_pending": pending,
        }

    # -- ids and the inbox ----------------------------------------------------

    @staticmethod
    def _next_number(cur: Any, prefix_key: str) -> int:
        cur.execute(
            "INSERT INTO counters (prefix, last) VALUES (%s, 1)"
            " ON CONFLICT (prefix) DO UPDATE SET last = counters.last + 1 RETURNING last",
            (prefix_key,),
        )
        return int(cur.fetchone()[0])

    def next_id(self, prefix: str) -> str:
        """``<prefix>-<n>``, counted in the database: never the same twice, across every replica."""
        key = file_name(prefix)
        if key is None:
            raise StoreError(f"invalid counters id {prefix!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)")
        with self._cur() as cur:
            return f"{prefix}-{self._next_number(cur, key)}"

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str:
        with self._tx() as cur:
            n = self._next_number(cur, "request")
            request_id = f"request-{n}"
            cur.execute(
                "INSERT INTO inbox (id, num, kind, payload, created_at) VALUES (%s, %s, %s, %s, %s)",
                (request_id, n, kind, _dumps(payload), self._clock()),
            )
        return request_id

    def take_requests(self) -> list[Request]:
        """Pending requests (free, expired or this replica's), oldest first, leased to this replica."""
        with self._cur() as cur:
            cur.execute(
                "WITH free AS (SELECT id FROM inbox WHERE lease_owner IS NULL OR lease_owner = %(owner)s"
                " OR lease_until < now() FOR UPDATE SKIP LOCKED)"
                " UPDATE inbox i SET lease_owner = %(owner)s, lease_until = now() + %(lease)s FROM free"
                " WHERE i.id = free.id RETURNING i.id, i.num, i.kind, i.payload, i.created_at",
                {"owner": self.owner, "lease": self.lease},
            )
            rows = cur.fetchall()
        requests = []
        for request_id, _, kind, payload, created_at in sorted(rows, key=lambda r: (r[1], r[0])):
            try:
                data = json.loads(payload)
                if not isinstance(data, dict):
                    raise TypeError("payload must be an object")
            except (ValueError, TypeError) as err:
                raise CorruptDocumentError(f"{self.where} inbox/{request_id}: damaged payload ({err})") from err
            requests.append(Request(request_id, kind, data, created_at))
        return requests

    def finish_request(self, request_id: str) -> None:
        key = self._key("request", request_id)
        with self._cur() as cur:
            cur.execute("DELETE FROM inbox WHERE id = %s", (key,))

    # -- outbox -----------------------------------------------------------------

    def _unknown_task(self, task_id: str) -> UnknownTaskError:
        return UnknownTaskError(f"no pending task {task_id!r} (finished, or never added)")

    @staticmethod
    def _task_columns(task: OutboxTask) -> dict[str, Any]:
        return {
            "id": task.id, "channel": task.channel, "review_id": task.review_id, "created_at": task.created_at,
            "ready_at": task.ready_at, "doc": _dumps(task.to_dict()),
        }

    def add_task(self, task: OutboxTask) -> bool:
        """Store a new task; False (and no write) if a pending task has this id."""
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO outbox (id, channel, review_id, created_at, ready_at, doc)"
                " VALUES (%(id)s, %(channel)s, %(review_id)s, %(created_at)s, %(ready_at)s, %(doc)s)"
                " ON CONFLICT (id) DO NOTHING RETURNING id",
                self._task_columns(task),
            )
            return cur.fetchone() is not None

    def get_task(self, task_id: str) -> OutboxTask:
        row = None
        if task_stem(task_id) is not None:
            with self._cur() as cur:
                cur.execute("SELECT id, doc FROM outbox WHERE id = %s", (task_id,))
                row = cur.fetchone()
        if row is None:
            raise self._unknown_task(task_id)
        return self._task(row)

    def due_tasks(self, channel: str, now: datetime, limit: int = 50) -> list[OutboxTask]:
        """Ready tasks of ``channel`` (oldest first) leased to this replica, so one replica delivers each."""
        if limit <= 0:
            return []
        with self._cur() as cur:
            cur.execute(
                "WITH free AS (SELECT id FROM outbox WHERE channel = %(channel)s AND ready_at <= %(now)s"
                " AND (lease_owner IS NULL OR lease_owner = %(owner)s OR lease_until < now())"
                ' ORDER BY created_at, id COLLATE "C" LIMIT %(limit)s FOR UPDATE SKIP LOCKED)'
                " UPDATE outbox o SET lease_owner = %(owner)s, lease_until = now() + %(lease)s FROM free"
                " WHERE o.id = free.id RETURNING o.id, o.doc, o.created_at",
                {"channel": channel, "now": now, "owner": self.owner, "lease": self.lease, "limit": limit},
            )
            rows = cur.fetchall()
        rows.sort(key=lambda row: (row[2], row[0]))
        return [self._task(row) for row in rows]

    def next_task_at(self, channel: str) -> datetime | None:
        with self._cur() as cur:
            cur.execute("SELECT min(ready_at) FROM outbox WHERE channel = %s", (channel,))
            value: datetime | None = cur.fetchone()[0]
        return value

    def pending_tasks(self, review_id: str | None = None) -> list[OutboxTask]:
        with self._cur() as cur:
            cur.execute(
                "SELECT id, doc FROM outbox WHERE %(review)s::text IS NULL OR review_id = %(review)s"
                ' ORDER BY created_at, id COLLATE "C"',
                {"review": review_id},
            )
            return [self._task(row) for row in cur.fetchall()]

    def update_task(self, task_id: str, mutate: Callable[[OutboxTask], T]) -> T:
        found = False
        if task_stem(task_id) is not None:
            with self._tx() as cur:
                cur.execute("SELECT id, doc FROM outbox WHERE id = %s FOR UPDATE", (task_id,))
                row = cur.fetchone()
                if row is not None:
                    found = True
                    task = self._task(row)
                    before = task.to_dict()
                    result = mutate(task)
                    if task.to_dict() != before:
                        if task.id != task_id:
                            raise StoreError(f"task {task_id}: an update may not change its id to {task.id!r}")
                        cur.execute(
                            "UPDATE outbox SET channel = %(channel)s, review_id = %(review_id)s,"
                            " created_at = %(created_at)s, ready_at = %(ready_at)s, doc = %(doc)s WHERE id = %(id)s",
                            self._task_columns(task),
                        )
        if not found:
            raise self._unknown_task(task_id)
        return result

    def finish_task(self, task_id: str) -> None:
        if task_stem(task_id) is None:
            raise StoreError(f"invalid task id {task_id!r}")
        with self._cur() as cur:
            cur.execute("DELETE FROM outbox WHERE id = %s", (task_id,))

    # -- intake dedupe and health ---------------------------------------------

    def record_delivery(self, key: str, work: list[dict[str, Any]] | None = None) -> bool:
        """True the first time ``key`` is seen (by any replica), False after; ``work`` waits with it (see Store)."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        shown = key.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\\0")
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO deliveries (digest, key, at, work) VALUES (%s, %s, %s, %s) ON CONFLICT (digest) DO NOTHING"
                " RETURNING digest",
                (digest, shown, self._clock(), None if work is None else json.dumps(work)),
            )
            return cur.fetchone() is not None

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        with self._cur() as cur:
            cur.execute("SELECT key, work FROM deliveries WHERE work IS NOT NULL ORDER BY at, digest")
            return [(key, json.loads(work)) for key, work in cur.fetchall()]

    def finish_delivery(self, key: str) -> None:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        with self._cur() as cur:
            cur.execute("UPDATE deliveries SET work = NULL WHERE digest = %s AND work IS NOT NULL", (digest,))

    def problems(self) -> list[str]:
        """Nothing is set aside in a database: a bad row is named when it is read."""
        return []

    # -- used by export / import ------------------------------------------------

    def counters(self) -> dict[str, int]:
        with self._cur() as cur:
            cur.execute("SELECT prefix, last FROM counters ORDER BY prefix")
            return {prefix: int(last) for prefix, last in cur.fetchall()}

    def raise_counter(self, prefix: str, last: int) -> None:
        """Make ``prefix``'s counter at least ``last`` (import: never hand out an id already used)."""
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO counters (prefix, last) VALUES (%s, %s)"
                " ON CONFLICT (prefix) DO UPDATE SET last = greatest(counters.last, excluded.last)",
                (self._key("counters", prefix), last),
            )

    def deliveries(self) -> list[tuple[str, str, datetime]]:
        with self._cur() as cur:
            cur.execute("SELECT digest, key, at FROM deliveries WHERE work IS NULL ORDER BY digest")
            return [(d, k, at) for d, k, at in cur.fetchall()]

    def put_request(self, request: Request) -> None:
        """Store a request under its own id (import)."""
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO inbox (id, num, kind, payload, created_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
                (self._key("request", request.id), number(request.id), request.kind, _dumps(request.payload),
                 request.created_at or self._clock()),
            )

    def put_delivery(self, digest: str, key: str, at: datetime) -> None:
        with self._cur() as cur:
            cur.execute("INSERT INTO deliveries (digest, key, at) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        (digest, key, at))

    def put_snapshot_bytes(self, run_id: str, data: bytes) -> None:
        """Store a snapshot document as it is (import), after checking it parses."""
        parse(Path(f"snapshot of {run_id}"), data, SNAPSHOT_FORMAT)
        self._save_snapshot_bytes(run_id, data)

