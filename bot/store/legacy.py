"""The upgrade from the directory store: read its files once, import them, keep them as a backup.

loopbot before the SQLite store kept one JSON document per file under
state_dir (``LEGACY_DIRS``; ended records in ``archive/`` as
``<prefix>~<id>.json``, keys seen in ``deliveries/<xx>/<hash>.json``) and two
journals: ``reviews/votes.jsonl`` (counted votes not yet in their review)
and ``deliveries/pending.jsonl`` (webhook votes accepted, not yet cast).
They are read as that store's readers did: an archived copy wins over a hot
leftover, a review's journal lines are folded in unless it already has
their delivery, a line cut short (never acknowledged) is dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..review_records import Review, Vote
from ..reviews import record_vote
from .base import OutboxTask, RunRecord, StoreError
from .records import delivery_digest

__all__ = ["LEGACY_DIRS", "found", "read", "upgrade"]

#: The directory store's own directories in state_dir (the markdown people read is not among them).
LEGACY_DIRS = ("runs", "reviews", "archive", "snapshots", "outbox", "counters", "inbox", "deliveries", "quarantine")


def found(state_dir: str | os.PathLike[str]) -> bool:
    """Does ``state_dir`` hold a directory store not imported yet?"""
    return any(os.path.isdir(os.path.join(state_dir, name)) for name in LEGACY_DIRS if name != "quarantine")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as err:
        raise StoreError(f"{path}: cannot be read for the upgrade ({err}); repair or move it aside, then retry"
                         ) from err


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """The complete, readable lines of a journal (a last line cut short was never acknowledged)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    for number, raw in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        try:
            line = json.loads(raw)
        except ValueError:
            import logging  # only while upgrading, and only for a damaged line

            logging.getLogger(__name__).warning("%s line %d: damaged, not imported", path, number)
            continue
        if isinstance(line, dict):
            yield line


def _files(directory: Path) -> dict[str, Path]:
    """stem -> file of the documents in ``directory`` (archived ones by the id after ``~``); none if it is absent."""
    return {p.stem.rsplit("~", 1)[-1]: p for p in sorted(directory.glob("*.json")) if not p.name.startswith(".")}


def _documents(directory: Path) -> dict[str, Any]:
    return {stem: _json(path) for stem, path in _files(directory).items()}


def _reviews(root: Path) -> list[dict[str, Any]]:
    """Every review, the archived copy winning over a hot leftover, the journal's votes folded into hot ones."""
    journal: dict[str, list[dict[str, Any]]] = {}
    for line in _lines(root / "reviews" / "votes.jsonl"):
        if isinstance(line.get("review"), str) and isinstance(line.get("vote"), dict):
            journal.setdefault(line["review"], []).append(line["vote"])
    ended = _files(root / "archive" / "reviews")
    reviews = []
    for stem, path in {**_files(root / "reviews"), **ended}.items():  # only the copy that wins is read
        review = Review.from_dict(_json(path))
        if stem not in ended:  # an archived review was written with its lines folded in
            _fold(review, journal.get(stem, []))
        reviews.append(review.to_dict())
    return reviews


def _pending_deliveries(root: Path) -> list[dict[str, Any]]:
    """Webhook deliveries accepted and not yet cast (no file of their key in ``deliveries/``), oldest first."""
    pending: dict[str, list[dict[str, Any]]] = {}
    for line in _lines(root / "deliveries" / "pending.jsonl"):
        key, work = line.get("key"), line.get("work")
        if not isinstance(key, str) or not isinstance(work, list):
            continue
        digest = delivery_digest(key)
        if not (root / "deliveries" / digest[:2] / f"{digest}.json").exists():
            pending.setdefault(key, work)
    return [{"key": key, "work": work} for key, work in pending.items()]


def read(state_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything the directory store in ``state_dir`` holds, as a ``sql_transfer`` dump."""
    from .sql_transfer import DUMP_FORMAT  # here: every command asks ``found``, only an upgrade reads

    root = Path(state_dir)
    runs = {**_files(root / "runs"), **_files(root / "archive" / "runs")}
    counters = {stem: doc.get("last") for stem, doc in _documents(root / "counters").items()}
    requests = [{"id": stem, "kind": doc["kind"], "payload": dict(doc["payload"]), "created_at": doc["created_at"]}
                for stem, doc in _documents(root / "inbox").items()]
    seen = []
    for path in sorted((root / "deliveries").glob("*/*.json")):
        doc = _json(path)
        seen.append({"digest": path.stem, "key": str(doc["key"]), "at": doc["at"]})
    return {
        "format": DUMP_FORMAT,
        "runs": [RunRecord.from_dict(_json(path)).to_dict() for path in runs.values()],
        "reviews": _reviews(root),
        "snapshots": {stem: path.read_text("utf-8", "surrogatepass")
                      for stem, path in _files(root / "snapshots").items()},
        "counters": {stem: last for stem, last in counters.items() if type(last) is int},
        "requests": requests,
        "tasks": [OutboxTask.from_dict(document).to_dict() for document in _documents(root / "outbox").values()],
        "pending_deliveries": _pending_deliveries(root),
        "deliveries": seen,
    }


def _fold(review: Review, votes: list[dict[str, Any]]) -> None:
    """Record journal votes as casting them did (each only counted), skipping those whose delivery it has."""
    keys = set(review.delivery_keys)
    for vote in map(Vote.from_dict, votes):
        if vote.delivery_key in keys:
            continue
        record_vote(review, vote, review.created_at)
        if vote.delivery_key is not None:
            keys.add(vote.delivery_key)


def upgrade(state_dir: str | os.PathLike[str], store: Any, *, now: datetime | None = None) -> str | None:
    """Import the directory store in ``state_dir`` into ``store`` and move its files aside; the line to log.

    None when there is nothing to import. Every write can be repeated, so a
    crash before the files are moved imports them again next time.
    """
    root = Path(state_dir)
    if not found(root):
        return None
    from .sql_transfer import load

    copied = load(store, read(root), store.where, empty=False)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    backup, n = root / f"directory-store-backup-{stamp}", 1
    while backup.exists():  # a backup of an earlier, interrupted upgrade is kept as it is
        n += 1
        backup = root / f"directory-store-backup-{stamp}-{n}"
    backup.mkdir()
    for name in LEGACY_DIRS:
        if (root / name).exists():
            os.replace(root / name, backup / name)
    return f"imported the directory store of {root} into {store.where}: {copied}; the old files are in {backup}"
