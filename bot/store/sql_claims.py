"""Run claims on PostgreSQL: a replica executes a run only while it holds the run's advisory lock.

``claim_run`` takes an advisory lock on ``run:<id>`` on a session of its
own; PostgreSQL releases it when that session ends, so a replica killed
with -9 frees its runs at once. ``run_owners`` names the replica a claim
belongs to, and each replica's election session (``bot.leader``) holds a
liveness lock: a claim cut off from a living replica is not taken from it.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from .sql import DatabaseError, PostgresStore
from .records import checked_key
from .sql_schema import advisory_key

__all__ = ["RunClaim", "claim_run", "session", "try_lock", "liveness_key"]

log = logging.getLogger(__name__)

def session(store: PostgresStore) -> Any:
    """A connection of its own (autocommit, keepalives): the session that holds an advisory lock."""
    return store.engine.connect(keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=3)


def try_lock(conn: Any, key: int) -> bool:
    return bool(conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])


def liveness_key(store: PostgresStore, replica: str) -> int:
    """The lock a replica's election session holds while that replica lives (``LeaderElection``)."""
    return advisory_key(store.schema, f"replica:{replica}")


def _owner_lives(conn: Any, store: PostgresStore, run_key: str) -> str | None:
    """The other, living replica the run's claim belongs to, if any: its liveness lock is held."""
    row = conn.execute("SELECT owner FROM run_owners WHERE run_key = %s", (run_key,)).fetchone()
    if row is None or row[0] == store.owner:
        return None
    key = liveness_key(store, row[0])
    if try_lock(conn, key):  # nobody holds it: that replica is gone
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        return None
    return str(row[0])


class RunClaim:
    """An advisory lock on ``run:<id>`` held by a session of its own, and ``run_owners`` naming this replica.

    A session cut while the replica lives (a PostgreSQL restart, an idle
    timeout) frees the lock, but the run stays this replica's while its
    election session holds its liveness lock: another replica's ``claim_run``
    refuses it, and ``held`` takes the lock again before the next write.
    """

    def __init__(self, conn: Any, run_id: str, store: PostgresStore) -> None:
        self._conn: Any = conn
        self._store = store
        self.run_id = run_id

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        with contextlib.suppress(Exception):  # a broken session: the row names a replica that let go anyway
            conn.execute("DELETE FROM run_owners WHERE run_key = %s AND owner = %s",
                         (checked_key("run", self.run_id), self._store.owner))
            conn.execute("SELECT pg_advisory_unlock_all()")  # free at once, not when the closed session ends
        with contextlib.suppress(Exception):  # closing the session releases the lock, even a broken one
            conn.close()

    def held(self) -> bool:
        """Is the run still this replica's? One round trip, asked before each write of the run. A lost session's
        claim is taken again on a new one unless another replica took the run (``bot.snapshots.ClaimLost``)."""
        conn = self._conn
        if conn is None:
            return False
        try:
            conn.execute("SELECT 1")
            return True
        except Exception:  # noqa: BLE001 - any failure of the session means the lock may be gone
            with contextlib.suppress(Exception):
                conn.close()
        again = None
        with contextlib.suppress(DatabaseError):
            again = claim_run(self._store, self.run_id)
        if again is None:
            self._conn = None
            log.warning("run %s: the database session holding its claim is gone and the run could not be claimed "
                        "again; this replica stops it", self.run_id)
            return False
        self._conn, again._conn = again._conn, None
        log.warning("run %s: the database session holding its claim was cut; claimed again", self.run_id)
        return True

    def __repr__(self) -> str:
        return f"RunClaim({self.run_id!r}, {'held' if self._conn is not None else 'released'})"


def claim_run(store: PostgresStore, run_id: str) -> RunClaim | None:
    """Claim ``run_id`` for this replica, or None while another session holds it or another living replica owns it."""
    run_key = checked_key("run", run_id)
    conn = session(store)
    try:
        with store.engine.errors():
            if not try_lock(conn, advisory_key(store.schema, f"run:{run_id}")):
                conn.close()
                return None
            owner = _owner_lives(conn, store, run_key)
            if owner is not None:
                log.debug("run %s belongs to replica %s, which lives: left to it", run_id, owner)
                conn.close()
                return None
            conn.execute("INSERT INTO run_owners (run_key, owner, since) VALUES (%s, %s, now())"
                         " ON CONFLICT (run_key) DO UPDATE SET owner = excluded.owner, since = excluded.since",
                         (run_key, store.owner))
    except BaseException:
        conn.close()
        raise
    return RunClaim(conn, run_id, store)
