"""The store's runs and their snapshots: part of ``SqlStore`` (``sql``), the same statements on both engines."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import orjson

from .base import ACTIVE_RUN_STATUSES, NO_CLAIM, RUN_FORMAT, Claim, CorruptDocumentError, RunRecord, StoreError
from .base import UnknownRunError
from .records import SNAPSHOT_FORMAT, checked_key, encode, engine_state, key_of, mutate_record, number, parse
from .sql_reviews import LATEST, ORDER

__all__ = ["RunTables", "RUN_COUNTS"]

T = TypeVar("T")
#: Every run by loop and status; the ``runs_loop_status`` index covers it (schema version 5).
RUN_COUNTS = "SELECT loop, status, count(*) FROM runs GROUP BY loop, status"
_ACTIVE = "status IN (" + ", ".join(f"'{s}'" for s in ACTIVE_RUN_STATUSES) + ")"
_COLUMNS = ("key", "id", "loop", "status", "trigger", "created_at", "num", "archived", "doc")
_WRITE_RUN = (f"INSERT INTO runs ({', '.join(_COLUMNS)}) VALUES ({', '.join(['%s'] * len(_COLUMNS))})"
              " ON CONFLICT (key) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:]))


class RunTables:
    """Runs in the ``runs`` table and their snapshots in ``snapshots`` (mixed into ``SqlStore``)."""

    engine: Any
    where: str
    _clock: Callable[[], datetime]
    _each: Callable[..., list[Any]]
    _decode: Callable[..., Any]

    def _run(self, row: tuple[Any, ...]) -> RunRecord:
        return self._decode("runs", row[0], row[1], RUN_FORMAT, RunRecord.from_dict)

    def _unknown_run(self, run_id: str) -> UnknownRunError:
        if key_of(run_id) is None:
            return UnknownRunError(f"no run {run_id!r}: run ids look like demo-run-3")
        return UnknownRunError(f"no run {run_id!r} in {self.where}; `loopbot status` lists the runs")

    def _write_run(self, cur: Any, run: RunRecord, was_archived: bool | None) -> None:
        ended = run.status not in ACTIVE_RUN_STATUSES
        if was_archived and not ended:
            raise StoreError(
                f"run {run.id} has ended and is archived; it cannot become {run.status!r} again - start a new one"
            )
        cur.execute(_WRITE_RUN, (checked_key("run", run.id), run.id, run.loop, run.status, run.trigger,
                                 run.created_at, number(run.id), ended, encode(run.to_dict())))

    def get_run(self, run_id: str) -> RunRecord:
        with self.engine.read() as cur:  # "": no run has an unsafe id
            row = cur.execute("SELECT key, doc FROM runs WHERE key = %s", (key_of(run_id) or "",)).fetchone()
        if row is None:
            raise self._unknown_run(run_id)
        return self._run(row)

    def _runs_where(self, where: str, params: tuple[Any, ...] = (), tail: str = "", order: str = ORDER
                    ) -> list[RunRecord]:
        with self.engine.read() as cur:
            cur.execute(f"SELECT key, doc FROM runs WHERE {where} ORDER BY {order} {tail}", params)
            return self._each(cur.fetchall(), self._run, "runs")

    def list_runs(self, *, archived: bool = False) -> list[RunRecord]:
        return self._runs_where("true" if archived else "NOT archived")

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T:
        """Change a run in one transaction; a run that ends is archived by the same write."""
        key = key_of(run_id)
        if key is None:
            raise self._unknown_run(run_id)
        with self.engine.write() as cur:
            row = cur.execute("SELECT key, doc, archived FROM runs WHERE key = %s FOR UPDATE", (key,)).fetchone()
            if row is None:
                raise self._unknown_run(run_id)
            run = self._run(row)
            return mutate_record("run", run_id, key, run, mutate, lambda: self._write_run(cur, run, bool(row[2])))

    def recent_runs(self, limit: int = 10) -> list[RunRecord]:
        """The ``limit`` latest-created ended runs, oldest first."""
        return self._runs_where("archived", (), f"LIMIT {int(limit)}", LATEST)[::-1] if limit > 0 else []

    def active_runs(self, *, status: str | None = None) -> list[RunRecord]:
        if status is not None:  # e.g. "running" alone: a waiting run's document is not even read
            return self._runs_where("NOT archived AND status = %s", (status,))
        return self._runs_where(f"NOT archived AND {_ACTIVE}")

    def active_run(self, loop: str) -> RunRecord | None:
        return next(iter(self._runs_where(f"NOT archived AND {_ACTIVE} AND loop = %s", (loop,), "LIMIT 1")), None)

    def run_with_trigger(self, trigger: str) -> RunRecord | None:
        return next(iter(self._runs_where("NOT archived AND trigger = %s", (trigger,), "LIMIT 1", LATEST)), None)

    def run_counts(self) -> dict[tuple[str, str], int]:
        """From the ``runs_loop_status`` index: no run's document is read (100,000 runs: ~12 ms, not ~400 ms)."""
        with self.engine.read() as cur:
            cur.execute(RUN_COUNTS)
            return {(loop, status): int(n) for loop, status, n in cur.fetchall()}

    def claim_run(self, run_id: str) -> Claim | None:
        """On SQLite always granted: one ``serve`` per state dir, whose runner serialises its threads."""
        if not self.engine.leases:
            return NO_CLAIM
        from .sql_claims import claim_run

        return claim_run(self, run_id)  # type: ignore[arg-type]

    # -- snapshots ----------------------------------------------------------

    def _save_snapshot_bytes(self, run_id: str, data: bytes) -> None:
        with self.engine.write_one() as cur:
            cur.execute(
                "INSERT INTO snapshots (run_key, data, saved_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (run_key) DO UPDATE SET data = excluded.data, saved_at = excluded.saved_at",
                (checked_key("run", run_id), data, self._clock()),
            )

    def save_state(self, run_id: str, state: Any) -> None:
        """The engine's own encoding wrapped in the store's document (NotJSONSerialisableError first)."""
        from loop_engine.serialization import encode_state  # here: status and decide never load a state

        checked_key("run", run_id)
        engine = encode_state(state)
        head = b'{"format":%d,"run_id":%b,"engine":' % (SNAPSHOT_FORMAT, orjson.dumps(run_id))
        self._save_snapshot_bytes(run_id, head + engine + b"}")

    def snapshot_bytes(self, run_id: str) -> bytes | None:
        """The stored snapshot document as it is (for ``loopbot export``)."""
        key = checked_key("run", run_id)
        with self.engine.read() as cur:
            row = cur.execute("SELECT data FROM snapshots WHERE run_key = %s", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    def _snapshot(self, run_id: str) -> tuple[str, dict[str, Any]] | None:
        data = self.snapshot_bytes(run_id)
        if data is None:
            return None
        label = f"{self.where} snapshots/{checked_key('run', run_id)}"
        return label, parse(label, data, SNAPSHOT_FORMAT)

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None:
        found = self._snapshot(run_id)
        return None if found is None else engine_state(*found)

    def load_state(self, run_id: str) -> Any:
        from loop_engine.errors import CorruptStateError
        from loop_engine.deserialization import state_from_dict

        found = self._snapshot(run_id)
        if found is None:
            return None
        try:
            return state_from_dict(engine_state(*found))
        except CorruptStateError as err:
            raise CorruptDocumentError(f"{found[0]}: {err}; restore it or delete the row") from err

    def snapshot_ids(self) -> list[str]:
        with self.engine.read() as cur:
            return [row[0] for row in cur.execute("SELECT run_key FROM snapshots ORDER BY run_key").fetchall()]

    def put_snapshot_bytes(self, run_id: str, data: bytes) -> None:
        """Store a snapshot document as it is (import), after checking it parses."""
        parse(f"snapshot of {run_id}", data, SNAPSHOT_FORMAT)
        self._save_snapshot_bytes(run_id, data)
