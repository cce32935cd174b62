"""The upgrade from the directory store: read its files once, import them, keep them as a backup.

loopbot before the SQLite store kept one JSON document per file under
state_dir: ``runs/`` and ``reviews/`` (the hot set), ``archive/runs`` and
``archive/reviews`` (``<prefix>~<id>.json``), ``snapshots/``, ``outbox/``,
``counters/``, ``inbox/``, ``deliveries/<xx>/<hash>.json`` (keys seen), two
journals - ``reviews/votes.jsonl`` (counted votes not yet written into their
review) and ``deliveries/pending.jsonl`` (webhook votes accepted and not yet
cast) - and ``quarantine/``. This reader is read-only and reads them as that
store's readers did: an archived copy wins over a hot leftover, a review's
journal lines are folded in unless the review already has their delivery, a
journal line cut short (never acknowledged) is dropped.

``upgrade`` imports everything (``sql_transfer.load``: writes that can be
repeated, so a crash half-way imports again at the next start), then moves
the old directories into ``state_dir/directory-store-backup-<time>/`` and
returns the one line that says so.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..reviews import Review, Vote
from .base import OutboxTask, Request, RunRecord, StoreError

__all__ = ["LEGACY_DIRS", "found", "upgrade", "LegacyState"]

log = logging.getLogger(__name__)

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


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The complete, readable lines of a journal (a last line cut short was never acknowledged)."""
    if not path.is_file():
        return
    data = path.read_bytes()
    for number, raw in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        try:
            line = json.loads(raw)
        except ValueError:
            log.warning("%s line %d: damaged, not imported", path, number)
            continue
        if isinstance(line, dict):
            yield number, line


def _documents(directory: Path) -> dict[str, Path]:
    """stem -> file of the documents in ``directory`` (archived ones by the id after ``~``)."""
    if not directory.is_dir():
        return {}
    return {p.stem.rsplit("~", 1)[-1]: p for p in sorted(directory.glob("*.json")) if not p.name.startswith(".")}


class LegacyState:
    """Everything a directory store at ``root`` holds, read as its own readers read it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _kind(self, kind: str) -> dict[str, Path]:
        return {**_documents(self.root / kind), **_documents(self.root / "archive" / kind)}  # the archive wins

    def list_runs(self, *, archived: bool = True) -> list[RunRecord]:
        return [RunRecord.from_dict(_json(path)) for path in self._kind("runs").values()]

    def list_reviews(self, *, archived: bool = True) -> list[Review]:
        journal: dict[str, list[dict[str, Any]]] = {}
        for _n, line in _lines(self.root / "reviews" / "votes.jsonl"):
            if isinstance(line.get("review"), str) and isinstance(line.get("vote"), dict):
                journal.setdefault(line["review"], []).append(line["vote"])
        ended = _documents(self.root / "archive" / "reviews")
        reviews = []
        for stem, path in self._kind("reviews").items():
            review = Review.from_dict(_json(path))
            if stem not in ended:  # an archived review was written with its lines folded in
                _fold(review, journal.get(stem, []))
            reviews.append(review)
        return reviews

    def snapshot_ids(self) -> list[str]:
        return list(_documents(self.root / "snapshots"))

    def snapshot_bytes(self, stem: str) -> bytes:
        return (self.root / "snapshots" / f"{stem}.json").read_bytes()

    def counters(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for stem, path in _documents(self.root / "counters").items():
            last = _json(path).get("last")
            if isinstance(last, int) and not isinstance(last, bool):
                found[stem] = last
        return found

    def take_requests(self) -> list[Request]:
        requests = []
        for stem, path in _documents(self.root / "inbox").items():
            doc = _json(path)
            requests.append(Request(stem, doc["kind"], dict(doc["payload"]), datetime.fromisoformat(doc["created_at"])))
        return requests

    def pending_tasks(self) -> list[OutboxTask]:
        return [OutboxTask.from_dict(_json(path)) for path in _documents(self.root / "outbox").values()]

    def deliveries(self) -> list[tuple[str, str, datetime]]:
        """(digest, key, when) of every delivery seen whose work (if any) is done."""
        done = []
        for path in sorted((self.root / "deliveries").glob("*/*.json")):
            doc = _json(path)
            done.append((path.stem, str(doc["key"]), datetime.fromisoformat(doc["at"])))
        return done

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """(key, work) of webhook deliveries accepted and not yet cast, oldest first."""
        import hashlib

        pending: dict[str, list[dict[str, Any]]] = {}
        for _n, line in _lines(self.root / "deliveries" / "pending.jsonl"):
            key, work = line.get("key"), line.get("work")
            if not isinstance(key, str) or not isinstance(work, list):
                continue
            digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
            if not (self.root / "deliveries" / digest[:2] / f"{digest}.json").exists():
                pending.setdefault(key, work)
        return list(pending.items())


def _fold(review: Review, votes: list[dict[str, Any]]) -> None:
    """Record journal votes as casting them did (each only counted), skipping those whose delivery it has."""
    keys = set(review.delivery_keys)
    for raw in votes:
        vote = Vote.from_dict(raw)
        if vote.delivery_key in keys:
            continue
        cast = replace(vote, at=vote.at or review.created_at)
        review.votes = [v for v in review.votes if v.who != vote.who] + [cast]
        review.history.append(cast)
        if vote.delivery_key is not None:
            review.delivery_keys.append(vote.delivery_key)
            keys.add(vote.delivery_key)


def upgrade(state_dir: str | os.PathLike[str], store: Any, *, now: datetime | None = None) -> str | None:
    """Import the directory store in ``state_dir`` into ``store`` and move its files aside; the line to log.

    None when there is nothing to import. Every write can be repeated, so a
    crash before the files are moved imports them again next time.
    """
    from .sql_transfer import dump, load

    root = Path(state_dir)
    if not found(root):
        return None
    copied = load(store, dump(LegacyState(root)), store.where, empty=False)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    backup, n = root / f"directory-store-backup-{stamp}", 1
    while backup.exists():  # a backup of an earlier, interrupted upgrade is kept as it is
        n += 1
        backup = root / f"directory-store-backup-{stamp}-{n}"
    backup.mkdir()
    for name in LEGACY_DIRS:
        if (root / name).exists():
            os.replace(root / name, backup / name)
    return f"imported the directory store of {root} into {store.where}: {copied.line()}; the old files are in {backup}"
