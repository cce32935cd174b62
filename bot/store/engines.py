"""The two engines under the SQL store: what differs between SQLite and PostgreSQL, and nothing else.

The store writes each statement once, in psycopg's style; SQLite's engine
turns it into its own (``translate``: ``?`` placeholders, no row locks - a
write is ``BEGIN IMMEDIATE``, which serialises every writer of the file -
and times as fixed-width UTC text, which compares as it sorts).

SQLite: WAL with ``synchronous=FULL`` (a commit is on disk when it returns),
one writer connection per store, readers on their own, and a
``busy_timeout`` so another process's write is waited for, not failed.
PostgreSQL: a few pooled autocommit connections.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from .base import StoreError

__all__ = ["DatabaseError", "DatabaseCorruptError", "DatabaseLockedError", "DatabaseReadOnlyError",
           "DiskFullError", "Engine", "Postgres", "Sqlite", "describe_url", "DB_NAME", "BUSY_TIMEOUT"]

#: The embedded database's file name in state_dir.
DB_NAME = "loopbot.db"
#: How long a write waits for another process's write transaction before it fails (seconds).
BUSY_TIMEOUT = 30.0


class DatabaseError(StoreError, OSError):
    """The database cannot be reached or refused a statement; an OSError, like a failing disk."""


class DatabaseCorruptError(DatabaseError):
    """The database file is damaged or not a database; restore it from a backup."""


class DatabaseLockedError(DatabaseError):
    """Another process held the database's write lock for longer than the busy timeout."""


class DatabaseReadOnlyError(DatabaseError):
    """The database (or its directory) cannot be written by this process."""


class DiskFullError(DatabaseError):
    """The disk holding the database is full; nothing was committed."""


def describe_url(url: str, schema: str | None = None) -> str:
    """``postgresql://user@host:port/db`` without the password (for messages and logs)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL libpq cannot parse is still named, minus what could be secret
        return "postgresql://(unparsable URL)"
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    where = f"postgresql://{user}{info.get('host') or 'localhost'}{port}/{info.get('dbname') or ''}"
    return where if schema is None else f"{where} (schema {schema})"


class Engine(Protocol):
    """What the store asks of an engine (see the module doc)."""

    name: str
    where: str
    #: Work is leased to the asking replica (PostgreSQL); with one serve per file there is nobody to lease from.
    leases: bool

    def read(self) -> contextlib.AbstractContextManager[Any]: ...

    def write(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor whose statements commit together when the block ends (rolled back on an error). On PostgreSQL
        statements are sent when rows are asked for (``fetch_each``: several statements' at once), or at the end."""

    def write_one(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor for one writing statement, committed when the block ends."""
        return self.write()

    def snapshot(self) -> contextlib.AbstractContextManager[Any]:
        """A cursor whose reads all see the database as of one moment (a review's row and its votes' rows)."""

    def time(self, value: Any) -> datetime | None: ...

    def fatal(self, err: BaseException) -> bool:
        """Did the engine itself fail (the transaction may be gone), rather than the store's own code?"""

    def close(self) -> None: ...


class _Pool:
    """A few idle connections reused across threads (each call takes one; one not ``reusable`` is closed)."""

    def __init__(self, connect: Callable[[], Any], reusable: Callable[[Any], bool], keep: int = 8) -> None:
        self._connect, self._reusable, self._keep = connect, reusable, keep
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            yield conn
        finally:
            reusable = self._reusable(conn)
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


# -- PostgreSQL -----------------------------------------------------------------


def _idle_postgres(conn: Any) -> bool:
    from psycopg.pq import TransactionStatus

    return not conn.closed and not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE


class Postgres(Engine):
    """PostgreSQL through psycopg (imported here only): autocommit connections with the bot's search_path."""

    name = "postgres"
    leases = True

    def __init__(self, url: str, schema: str) -> None:
        self.url, self.schema = url, schema
        self.where = describe_url(url, schema)
        self._pool = _Pool(self.connect, _idle_postgres)

    def connect(self, **options: Any) -> Any:
        """An autocommit connection with the bot's search_path; ``options``: more of libpq's (keepalives)."""
        import psycopg

        with self.errors():
            return psycopg.connect(self.url, autocommit=True, connect_timeout=10,
                                   options=f"-c search_path={self.schema} -c timezone=UTC", **options)

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.Error as err:
            raise DatabaseError(f"{self.where}: {type(err).__name__}: {str(err).strip()}") from err

    @contextlib.contextmanager
    def read(self) -> Iterator[Any]:
        with self.errors(), self._pool.connection() as conn:
            yield _Native(conn)

    @contextlib.contextmanager
    def write(self, begin: str | None = None) -> Iterator[Any]:
        """One pipeline, ending in one round trip (psycopg's ``transaction()`` syncs at each of its three nested
        exits in a pipeline, outside one at each statement). Without ``begin`` it is the transaction: what it sends
        commits at its Sync, or rolls back if a statement failed (asking for rows only flushes: it stays open)."""
        with self.errors(), self._pool.connection() as conn, conn.pipeline():
            if begin:
                conn.execute(begin)
            try:
                yield _Native(conn)
            except Exception as err:
                if not self.fatal(err):  # the block's own failure (the engine's is rolled back, or the pool drops it)
                    conn.execute("ROLLBACK")  # ends the pipeline's transaction too, with what it changed
                raise
            if begin:
                conn.execute("COMMIT")  # after a failed statement the server skips it, and the Sync raises the failure

    def write_one(self) -> contextlib.AbstractContextManager[Any]:
        return self.read()  # autocommit: the statement commits by itself

    def snapshot(self) -> contextlib.AbstractContextManager[Any]:
        # in BEGIN: after a ROLLBACK psycopg sends DEALLOCATE ALL first, and SET TRANSACTION must come before it
        return self.write("BEGIN ISOLATION LEVEL REPEATABLE READ")

    def fatal(self, err: BaseException) -> bool:
        import psycopg

        return isinstance(err, psycopg.Error)

    def time(self, value: Any) -> datetime | None:
        return value  # every time column is timestamptz, which psycopg reads as a datetime

    def close(self) -> None:
        self._pool.close()


def numbered(statement: str) -> str:
    """A statement's ``%s`` placeholders as PostgreSQL's own ``$1, $2, ...``."""
    parts = statement.split("%s")
    return "".join(f"{part}${n}" for n, part in enumerate(parts[:-1], 1)) + parts[-1]


class _Native:
    """The store's cursor on PostgreSQL: a statement with values in a list goes ``numbered`` to a ``RawCursor``.

    psycopg turns ``%s`` into ``$1`` in Python, and remembers only statements of at most 50 values (a batch's
    INSERT was parsed anew each time: 40% of a cast's CPU on 20 reviews). Each statement has a cursor of its own:
    in a pipeline a shared one could fetch an earlier statement's late rows.
    """

    __slots__ = ("_conn", "_raw", "_last")

    def __init__(self, conn: Any) -> None:
        from psycopg import RawCursor

        self._conn, self._raw = conn, RawCursor
        self._last: Any = None  # the cursor of the latest statement

    def execute(self, statement: Any, params: Any = None) -> _Native:
        if isinstance(statement, str) and isinstance(params, (list, tuple)) and params:
            self._last = self._raw(self._conn).execute(numbered(statement), params)
        else:
            self._last = self._conn.execute(statement, params)
        return self

    def fetch_each(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """Each statement's rows; in a write all are sent before any is read: one round trip."""
        cursors = [self.execute(statement, params)._last for statement, params in statements]
        return [cursor.fetchall() for cursor in cursors]

    def fetchone(self) -> Any:
        return self._last.fetchone()

    def fetchall(self) -> list[Any]:
        return self._last.fetchall()


# -- SQLite -----------------------------------------------------------------------

_NAMED = re.compile(r"%\((\w+)\)s")
_DROPPED = re.compile(r' FOR UPDATE( SKIP LOCKED)?| COLLATE "C"|::text|::jsonb')


@lru_cache(maxsize=256)
def translate(statement: str) -> str:
    """A statement in psycopg's style as SQLite reads it (see the module doc)."""
    return _NAMED.sub(r":\1", _DROPPED.sub("", statement)).replace("%s", "?")


def sqlite_time(value: datetime) -> str:
    """Fixed-width UTC text: compares as the times do (isoformat drops zero microseconds)."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class _Cursor(sqlite3.Cursor):
    """A sqlite3 cursor that takes the store's statements (``translate``) and times (``sqlite_time``)."""

    def execute(self, statement: str, params: Any = ()) -> _Cursor:
        if isinstance(params, dict):
            params = {key: sqlite_time(v) if isinstance(v, datetime) else v for key, v in params.items()}
        else:
            params = tuple(sqlite_time(v) if isinstance(v, datetime) else v for v in params)
        return super().execute(translate(statement), params)

    def fetch_each(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Any]]:
        """Each statement's rows (``_Native.fetch_each``: no round trips to save here)."""
        return [self.execute(statement, params).fetchall() for statement, params in statements]


#: (words in SQLite's message, the error it is, what to say)
_FAILURES: tuple[tuple[tuple[str, ...], type[DatabaseError], str], ...] = (
    (("full",), DiskFullError, "the disk is full ({text}); nothing was committed - free space and try again"),
    (("locked", "busy"), DatabaseLockedError, "the database stayed locked by another process for {wait:g} s"
     " ({text}); is a stuck loopbot or another program holding it?"),
    (("readonly", "read-only", "unable to open", "permission"), DatabaseReadOnlyError, "cannot open or write the"
     " database ({text}); check that this user may write the file and its directory"),
    (("not a database", "malformed", "corrupt"), DatabaseCorruptError, "the database is damaged ({text}); restore"
     " it from a backup (`loopbot export` of a good copy) or move it aside to start empty"),
)


class Sqlite(Engine):
    """``loopbot.db`` in a state dir (see the module doc); errors name the file and say what to do."""

    name = "sqlite"
    leases = False

    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> None:
        self.path = Path(path)
        self.where = str(self.path)
        self.busy_timeout = busy_timeout
        self._write_lock = threading.RLock()  # reentrant: see write()
        self._writer: sqlite3.Connection | None = None
        self._readers = _Pool(self.connect, lambda conn: not conn.in_transaction)

    def connect(self) -> sqlite3.Connection:
        with self.errors():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None,  # busy_timeout
                                   check_same_thread=False)
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = FULL")
            except BaseException:
                conn.close()
                raise
        return conn

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """SQLite's errors as the store names them: what happened to which file, and what to do."""
        try:
            yield
        except sqlite3.Error as err:
            text = str(err)
            for words, kind, why in _FAILURES:
                if any(word in text.lower() for word in words):
                    raise kind(f"{self.where}: " + why.format(text=text, wait=self.busy_timeout)) from err
            raise DatabaseError(f"{self.where}: {type(err).__name__}: {text}") from err

    def read(self) -> contextlib.AbstractContextManager[Any]:
        return self._reader(begin=False)

    def snapshot(self) -> contextlib.AbstractContextManager[Any]:
        return self._reader(begin=True)  # a deferred transaction: WAL keeps its first read's view until the end

    @contextlib.contextmanager
    def _reader(self, *, begin: bool) -> Iterator[Any]:
        with self._readers.connection() as conn:
            try:
                with self.errors():
                    if begin:
                        conn.execute("BEGIN")
                    yield conn.cursor(_Cursor)
            finally:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def write(self) -> Iterator[Any]:
        """``BEGIN IMMEDIATE`` on this store's one writer connection, committed (and synced) at the end; a write
        begun inside another of the same thread (a mutator that writes) joins it, as one transaction."""
        with self._write_lock:
            if self._writer is None:
                self._writer = self.connect()
            conn = self._writer
            if conn.in_transaction:
                with self.errors():
                    yield conn.cursor(_Cursor)
                return
            with self.errors():
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn.cursor(_Cursor)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise

    def fatal(self, err: BaseException) -> bool:
        return isinstance(err, sqlite3.Error)

    def time(self, value: Any) -> datetime | None:
        return None if value is None else datetime.fromisoformat(value)

    def close(self) -> None:
        with self._write_lock:
            writer, self._writer = self._writer, None
        self._readers.close()
        if writer is not None:
            writer.close()
