"""Replicas on one PostgreSQL store: one leader (an advisory lock on its own connection) and heartbeats.

``LeaderElection`` keeps a connection of its own and tries
``pg_try_advisory_lock`` every ``interval`` seconds; the replica holding it
leads (runs the scheduler, deadlines and restarts of interrupted runs).
PostgreSQL releases the lock when that session ends, so a leader killed
with -9 (its socket closes) or cut off (``tcp_keepalives``, or the
session's ``idle_session_timeout``) is replaced at the next try of another
replica. A leader whose connection fails steps down at once, before it
reconnects and competes again.

Every replica writes its heartbeat (and whether it leads) to ``replicas``
each round; ``replicas()`` is what ``status`` and ``/healthz`` show. The
election's session also holds the replica's liveness lock: a run claimed by
a replica whose lock is held is not taken from it
(``bot.store.sql_claims``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.store.sql import DatabaseError, PostgresStore, describe_url
from bot.store.sql_claims import liveness_key, session, try_lock
from bot.store.sql_schema import advisory_key

__all__ = ["LeaderElection", "Replica", "replicas", "scheduler_url"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replica:
    name: str
    started_at: datetime
    heartbeat: datetime
    leader: bool
    info: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "leader": self.leader, "heartbeat": self.heartbeat.isoformat(),
                "started_at": self.started_at.isoformat(), **({"info": self.info} if self.info else {})}


def scheduler_url(url: str) -> str:
    """The SQLAlchemy URL of the same database (APScheduler's SQLAlchemyJobStore) with the psycopg 3 dialect."""
    for scheme in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    raise ValueError(f"not a PostgreSQL URL: {describe_url(url)}")


def replicas(store: PostgresStore) -> list[Replica]:
    """Every replica that has beaten, leader first, then by name (status and /healthz)."""
    with store.engine.read() as cur:
        cur.execute("SELECT name, started_at, heartbeat, leader, info FROM replicas ORDER BY leader DESC, name")
        return [Replica(n, s, h, bool(lead), json.loads(i)) for n, s, h, lead, i in cur.fetchall()]


class LeaderElection:
    """Compete for leadership of ``store``'s schema on a thread; ``on_elected``/``on_demoted`` say when it changes."""

    def __init__(
        self,
        store: PostgresStore,
        *,
        name: str | None = None,
        interval: float = 2.0,
        on_elected: Callable[[], None] | None = None,
        on_demoted: Callable[[], None] | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.name = name or store.owner
        self.interval = interval
        self._on_elected = on_elected or (lambda: None)
        self._on_demoted = on_demoted or (lambda: None)
        self._info = json.dumps(info or {}, sort_keys=True)
        self._key = advisory_key(store.schema, "leader")
        self._conn: Any = None
        self._leading = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    @property
    def leading(self) -> bool:
        return self._leading

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="loopbot-leader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop competing; a leader releases the lock so another takes over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 10)
        if self._conn is not None:  # released before the session closes: closing alone frees it a moment later
            with contextlib.suppress(Exception):
                self._conn.execute("SELECT pg_advisory_unlock_all()")
        self._drop_connection()
        self._set_leading(False)
        with contextlib.suppress(DatabaseError), self.store.engine.read() as cur:
            cur.execute("UPDATE replicas SET leader = false WHERE name = %s", (self.name,))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.round()
            self._stop.wait(self.interval)

    def round(self) -> bool:
        """One try: take or keep the lock, then beat. Returns whether this replica leads now."""
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._set_leading(False)  # the lock went with the old session: a new one must win it again
                self._drop_connection()
                self._connect()
            if not self._leading:
                row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
                if row[0]:
                    self._set_leading(True)
            else:
                self._conn.execute("SELECT 1")  # a dead session is noticed here, and the leader steps down
            self._conn.execute(
                "INSERT INTO replicas (name, started_at, heartbeat, leader, info) VALUES (%s, now(), now(), %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET heartbeat = now(), leader = excluded.leader, info = excluded.info",
                (self.name, self._leading, self._info),
            )
            if self._leading:
                self._conn.execute("UPDATE replicas SET leader = false WHERE name <> %s AND leader", (self.name,))
            self.last_error = None
        except Exception as err:  # noqa: BLE001 - the database went away: step down, try again next round
            self.last_error = f"{type(err).__name__}: {err}"
            where = "" if isinstance(err, DatabaseError) else f" on {self.store.where}"  # the error names it
            log.warning("leader election%s: %s", where, self.last_error)
            self._drop_connection()
            self._set_leading(False)
        return self._leading

    def _connect(self) -> None:
        """A new session, which holds this replica's liveness lock for as long as it lasts (see ``RunClaim``)."""
        self._conn = session(self.store)
        if not try_lock(self._conn, liveness_key(self.store, self.name)):
            log.warning("replica %s: another live process on %s has that name; give each replica its own",
                        self.name, self.store.where)

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # closing a broken connection
                conn.close()

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        log.info("replica %s %s the leader of %s", self.name, "is now" if leading else "is no longer",
                 self.store.where)
        (self._on_elected if leading else self._on_demoted)()
