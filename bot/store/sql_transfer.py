"""``loopbot export`` / ``import``: everything a store keeps as one JSON dump, and back into an empty store.

Between SQLite and PostgreSQL (export with one config, import with the
other), or from a directory store (``legacy``). Counters are raised, never
lowered, so no id is handed out twice after a move; the target must be
empty, so a copy never mixes two bots' histories.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_bytes

from ..review_records import Review
from .base import OutboxTask, Request, RunRecord, StoreError

__all__ = ["DUMP_FORMAT", "counted", "dump", "load", "read_dump", "write_dump"]

#: The dump's own format version; a newer one is refused by name.
DUMP_FORMAT = 1
_PARTS = ("runs", "reviews", "snapshots", "counters", "requests", "tasks", "pending_deliveries", "deliveries")


def counted(data: dict[str, Any]) -> str:
    """What a dump holds, in the words the commands report a copy with."""
    votes = sum(len(review.get("history") or []) for review in data["reviews"])
    return (f"{len(data['runs'])} runs, {len(data['reviews'])} reviews ({votes} votes), "
            f"{len(data['snapshots'])} snapshots, {len(data['counters'])} id counters, "
            f"{len(data['requests'])} pending requests, {len(data['tasks'])} outbox tasks, "
            f"{len(data['pending_deliveries']) + len(data['deliveries'])} delivery keys")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def dump(source: Any) -> dict[str, Any]:
    """Everything the store ``source`` keeps, as JSON-ready data."""
    reviews = source.list_reviews(archived=True)
    return {
        "format": DUMP_FORMAT,
        "runs": [r.to_dict() for r in source.list_runs(archived=True)],
        "reviews": [r.to_dict() for r in reviews],
        "snapshots": {key: source.snapshot_bytes(key).decode("utf-8", "surrogatepass")
                      for key in source.snapshot_ids()},
        "counters": dict(source.counters()),
        "requests": [{"id": q.id, "kind": q.kind, "payload": q.payload, "created_at": _iso(q.created_at)}
                     for q in source.pending_requests()],
        "tasks": [t.to_dict() for t in source.pending_tasks()],
        "pending_deliveries": [{"key": key, "work": work} for key, work in source.pending_deliveries()],
        "deliveries": [{"digest": d, "key": k, "at": _iso(at)} for d, k, at in source.deliveries()],
    }


def load(target: Any, data: dict[str, Any], where: str, *, empty: bool = True) -> str:
    """Put a dump into ``target`` (empty unless ``empty=False``), then check every run, review and vote arrived
    as it left; what was copied (``counted``). Every write can be repeated: loading a dump twice changes nothing
    more."""
    if empty and (target.list_runs(archived=True) or target.list_reviews(archived=True) or target.pending_tasks()):
        raise StoreError(f"{where} already holds runs, reviews or tasks; copy only into an empty store")
    target.put_records([RunRecord.from_dict(run) for run in data["runs"]],
                       [Review.from_dict(review) for review in data["reviews"]])
    for key, text in data["snapshots"].items():
        target.put_snapshot_bytes(key, text.encode("utf-8", "surrogatepass"))
    for prefix, last in data["counters"].items():
        target.raise_counter(prefix, int(last))
    for q in data["requests"]:
        at = None if q.get("created_at") is None else datetime.fromisoformat(q["created_at"])
        target.put_request(Request(q["id"], q["kind"], dict(q["payload"]), at))
    for task in data["tasks"]:
        target.add_task(OutboxTask.from_dict(task))
    if data["pending_deliveries"]:  # votes accepted and not yet cast travel with their delivery, in one write
        target.record_deliveries([(pending["key"], pending["work"]) for pending in data["pending_deliveries"]])
    for seen in data["deliveries"]:
        target.put_delivery(seen["digest"], seen["key"], datetime.fromisoformat(seen["at"]))
    for review in data["reviews"]:
        arrived = target.get_review(review["id"]).to_dict()
        if arrived != review:
            raise StoreError(f"review {review['id']} did not arrive as it left (votes: {len(arrived['votes'])} of "
                             f"{len(review['votes'])}); {where} is incomplete")
    for run in data["runs"]:
        if target.get_run(run["id"]).to_dict() != run:
            raise StoreError(f"run {run['id']} did not arrive as it left; {where} is incomplete")
    return counted(data)


def write_dump(source: Any, path: str | os.PathLike[str]) -> str:
    """``dump(source)`` written atomically to ``path`` (never over an existing file); what it holds."""
    target = Path(path)
    if target.exists():
        raise StoreError(f"{target} exists; export writes a new file, it never overwrites one")
    data = dump(source)
    atomic_write_bytes(target, json.dumps(data, indent=1, sort_keys=True).encode("utf-8", "surrogatepass") + b"\n")
    return counted(data)


def read_dump(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A dump written by ``write_dump``, or a directory store's state_dir read as one."""
    source = Path(path)
    if source.is_dir():
        from . import legacy

        if not legacy.found(source):
            raise StoreError(f"{source} holds no directory store (no runs/, reviews/, ... in it)")
        return legacy.read(source)
    try:
        data = json.loads(source.read_bytes())
    except (OSError, ValueError) as err:
        raise StoreError(f"{source}: not a loopbot export ({err})") from err
    version = data.get("format") if isinstance(data, dict) else None
    if not isinstance(version, int) or version > DUMP_FORMAT:
        raise StoreError(f"{source}: export format {version!r} is not one this loopbot reads (up to "
                         f"{DUMP_FORMAT}); upgrade loopbot")
    missing = [part for part in _PARTS if part not in data]
    if missing:
        raise StoreError(f"{source}: not a complete loopbot export (no {', '.join(missing)})")
    return data
