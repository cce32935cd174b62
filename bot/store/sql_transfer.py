"""``loopbot export`` / ``import``: copy everything a store keeps between a directory and PostgreSQL.

Runs (hot and archived), reviews with every vote, snapshots, id counters,
pending run requests, outbox tasks and intake dedupe keys are copied as
they are; counters are raised, never lowered, so no id is handed out twice
after a move. The target must be empty (no run, review or task), so a copy
never mixes two bots' histories. The markdown files of the local channel
and the scheduler's job store are not part of the store and stay where
they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .base import Request, Store, StoreError
from .documents import file_name
from .files import FileStore
from .intake import DOC_FORMAT
from .sql import PostgresStore

__all__ = ["Copied", "copy_store", "check_empty"]


@dataclass
class Copied:
    """What a copy moved, for the command's report and for checking nothing was lost."""

    runs: int = 0
    reviews: int = 0
    votes: int = 0
    snapshots: int = 0
    counters: int = 0
    requests: int = 0
    tasks: int = 0
    deliveries: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"{self.runs} runs, {self.reviews} reviews ({self.votes} votes), {self.snapshots} snapshots, "
                f"{self.counters} id counters, {self.requests} pending requests, {self.tasks} outbox tasks, "
                f"{self.deliveries} delivery keys")


def check_empty(store: Store, where: str) -> None:
    """StoreError unless ``store`` holds no run, review or task (a copy goes only into an empty store)."""
    if store.list_runs(archived=True) or store.list_reviews(archived=True) or store.pending_tasks():
        raise StoreError(f"{where} already holds runs, reviews or tasks; copy only into an empty store")


# -- what only each implementation can say ------------------------------------------


def _counters(store: Store) -> dict[str, int]:
    if isinstance(store, PostgresStore):
        return store.counters()
    assert isinstance(store, FileStore)
    found: dict[str, int] = {}
    directory = store.root / "counters"
    if directory.is_dir():
        for path in sorted(directory.glob("*.json")):
            document = json.loads(path.read_text("utf-8"))
            last = document.get("last")
            if isinstance(last, int) and not isinstance(last, bool):
                found[path.stem] = last
    return found


def _raise_counter(store: Store, prefix: str, last: int) -> None:
    if isinstance(store, PostgresStore):
        store.raise_counter(prefix, last)
        return
    assert isinstance(store, FileStore)
    current = _counters(store).get(prefix, 0)
    if last > current:
        store._write(store._doc_path("counters", prefix), {"format": DOC_FORMAT, "prefix": prefix, "last": last})


def _deliveries(store: Store) -> Iterator[tuple[str, str, datetime]]:
    if isinstance(store, PostgresStore):
        yield from store.deliveries()
        return
    assert isinstance(store, FileStore)
    directory = store.root / "deliveries"
    if directory.is_dir():
        for path in sorted(directory.glob("*/*.json")):
            document = json.loads(path.read_text("utf-8"))
            yield path.stem, str(document["key"]), datetime.fromisoformat(document["at"])


def _put_delivery(store: Store, digest: str, key: str, at: datetime) -> None:
    if isinstance(store, PostgresStore):
        store.put_delivery(digest, key, at)
        return
    assert isinstance(store, FileStore)
    path = store.root / "deliveries" / digest[:2] / f"{digest}.json"
    if not path.exists():
        store._write(path, {"format": DOC_FORMAT, "key": key, "at": at.isoformat()})


def _snapshot(store: Store, run_id: str) -> bytes | None:
    if isinstance(store, PostgresStore):
        return store.snapshot_bytes(run_id)
    assert isinstance(store, FileStore)
    try:
        return store._snapshot_path(run_id).read_bytes()
    except FileNotFoundError:
        return None


def _put_snapshot(store: Store, run_id: str, data: bytes) -> None:
    if isinstance(store, PostgresStore):
        store.put_snapshot_bytes(run_id, data)
        return
    assert isinstance(store, FileStore)
    store._write(store._snapshot_path(run_id), data.rstrip(b"\n") + b"\n")


def _put_request(store: Store, request: Request) -> None:
    if isinstance(store, PostgresStore):
        store.put_request(request)
        return
    assert isinstance(store, FileStore)
    store._write(store._doc_path("inbox", request.id), {
        "format": DOC_FORMAT, "id": request.id, "kind": request.kind, "payload": request.payload,
        "created_at": (request.created_at or datetime.now().astimezone()).isoformat(),
    })


def _snapshot_ids(store: Store, run_ids: list[str]) -> list[str]:
    """Runs with a snapshot: every run's, and any snapshot whose run record is gone."""
    names = {file_name(r) or r for r in run_ids}
    extra: list[str] = []
    if isinstance(store, PostgresStore):
        extra = [key for key in store.snapshot_ids() if key not in names]
    elif isinstance(store, FileStore) and (store.root / "snapshots").is_dir():
        extra = [p.stem for p in sorted((store.root / "snapshots").glob("*.json")) if p.stem not in names]
    return [*run_ids, *extra]


# -- the copy -----------------------------------------------------------------------


def copy_store(source: Store, target: Store) -> Copied:
    """Copy everything ``source`` keeps into the empty ``target``, then check every review and vote arrived."""
    copied = Copied()
    runs = source.list_runs(archived=True)
    reviews = source.list_reviews(archived=True)
    for run in runs:
        target.put_run(run)
        copied.runs += 1
    for review in reviews:
        target.put_review(review)
        copied.reviews += 1
        copied.votes += len(review.votes)
    for run_id in _snapshot_ids(source, [r.id for r in runs]):
        data = _snapshot(source, run_id)
        if data is not None:
            _put_snapshot(target, run_id, data)
            copied.snapshots += 1
    for prefix, last in _counters(source).items():
        _raise_counter(target, prefix, last)
        copied.counters += 1
    for request in source.take_requests():
        _put_request(target, request)
        copied.requests += 1
    for task in source.pending_tasks():
        target.add_task(task)
        copied.tasks += 1
    for key, work in source.pending_deliveries():  # votes accepted and not yet cast travel with their delivery
        target.record_delivery(key, work)
        copied.deliveries += 1
    for digest, key, at in _deliveries(source):
        _put_delivery(target, digest, key, at)
        copied.deliveries += 1
    _verify(reviews, runs, target)
    return copied


def _verify(reviews: list[Any], runs: list[Any], target: Store) -> None:
    """StoreError naming the first review, vote or run that did not arrive as it left."""
    for review in reviews:
        arrived = target.get_review(review.id)
        if arrived.to_dict() != review.to_dict():
            raise StoreError(f"review {review.id} did not arrive as it left (votes: {len(arrived.votes)} of "
                             f"{len(review.votes)}); the target is incomplete")
    for run in runs:
        if target.get_run(run.id).to_dict() != run.to_dict():
            raise StoreError(f"run {run.id} did not arrive as it left; the target is incomplete")

