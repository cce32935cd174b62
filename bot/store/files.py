"""FileStore: the embedded default store, JSON documents under ``state_dir``.

Layout (one document per file, each written through loop_engine.atomic):
``runs/<id>.json``, ``snapshots/<run id>.json``, ``reviews/<id>.json``,
``counters/<prefix>.json``, ``inbox/<request id>.json``. Read-modify-write
is serialised by ``fcntl.flock`` on a hidden ``.lock`` file per directory:
flock locks belong to an open file description, so they exclude other
threads (each acquisition opens its own descriptor) as well as other
processes, and the kernel drops them when a holder is killed.
File names are lower-cased ids, so lookups are case-insensitive.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, UTC
from pathlib import Path
from typing import Any, Protocol, TypeVar

from loop_engine.atomic import atomic_write_text, fsync_directory

from adapters.suggest import did_you_mean

from ..reviews import REVIEW_FORMAT, Review
from .base import (
    RUN_FORMAT,
    CorruptDocumentError,
    NewerFormatError,
    Request,
    RunRecord,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
)

__all__ = ["FileStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
D = TypeVar("D")

#: Format of the small documents this module owns (snapshots, counters, requests).
DOC_FORMAT = 1
_SAFE_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
_TRAILING_NUMBER = re.compile(r"-(\d+)$")


def _file_name(doc_id: str) -> str | None:
    """The file stem for an id, or None if the id could escape its directory."""
    name = doc_id.strip().lower()
    if not _SAFE_ID.fullmatch(name) or ".." in name:
        return None
    return name


def _number(doc_id: str) -> int:
    match = _TRAILING_NUMBER.search(doc_id)
    return int(match.group(1)) if match else 0


class _Record(Protocol):
    """A run or a review: the documents stored one per file and changed under a lock."""

    id: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Record)


def _creation_order(record: _Record) -> tuple[datetime, int, str]:
    return record.created_at, _number(record.id), record.id


class FileStore:
    """The ``Store`` on a directory; safe to share between threads and processes."""

    def __init__(self, state_dir: str | os.PathLike[str], *, clock: Callable[[], datetime] | None = None) -> None:
        self.root = Path(state_dir)
        self._clock = clock or (lambda: datetime.now(UTC))

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # -- plumbing ---------------------------------------------------------

    def _path(self, kind: str, doc_id: str) -> Path:
        name = _file_name(doc_id)
        if name is None:
            raise StoreError(f"invalid {kind} id {doc_id!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)")
        return self.root / kind / f"{name}.json"

    @contextmanager
    def _locked(self, kind: str) -> Iterator[None]:
        directory = self.root / kind
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _write(self, path: Path, document: dict[str, Any]) -> None:
        atomic_write_text(path, json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n")

    def _read(self, path: Path, supported: int) -> dict[str, Any] | None:
        """The document at ``path`` (None if absent), refusing damaged or newer ones by file name."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            document = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CorruptDocumentError(
                f"{path}: not a valid JSON document ({err}); restore it from a backup or move it aside"
            ) from err
        if not isinstance(document, dict) or not isinstance(document.get("format"), int):
            raise CorruptDocumentError(f"{path}: not a loopbot document (no integer 'format' field); move it aside")
        if document["format"] > supported:
            raise NewerFormatError(
                f"{path}: format version {document['format']} is newer than this loopbot reads "
                f"(up to {supported}); upgrade loopbot to use this state_dir"
            )
        return document

    def _decode(self, path: Path, document: dict[str, Any], build: Callable[[dict[str, Any]], D]) -> D:
        try:
            return build(document)
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptDocumentError(
                f"{path}: damaged document ({type(err).__name__}: {err}); restore it or move it aside"
            ) from err

    def _update(self, kind: str, path: Path, load: Callable[[], R], mutate: Callable[[R], T]) -> T:
        """Run ``mutate`` under the ``kind`` lock on a fresh load; write only if the document changed."""
        with self._locked(kind):
            record = load()
            before = record.to_dict()
            result = mutate(record)
            after = record.to_dict()
            if after != before:
                self._write(path, after)
        return result

    def _ids(self, kind: str) -> list[Path]:
        directory = self.root / kind
        if not directory.is_dir():
            return []
        return sorted(p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith("."))

    # -- runs -------------------------------------------------------------

    def put_run(self, run: RunRecord) -> None:
        path = self._path("runs", run.id)
        with self._locked("runs"):
            self._write(path, run.to_dict())

    def _load_run(self, path: Path, run_id: str) -> RunRecord:
        document = self._read(path, RUN_FORMAT)
        if document is None:
            raise UnknownRunError(f"no run {run_id!r} in {self.root}; `loopbot status` lists the runs")
        return self._decode(path, document, RunRecord.from_dict)

    def get_run(self, run_id: str) -> RunRecord:
        if _file_name(run_id) is None:
            raise UnknownRunError(f"no run {run_id!r}: run ids look like demo-run-3")
        return self._load_run(self._path("runs", run_id), run_id)

    def list_runs(self) -> list[RunRecord]:
        return sorted((self._load_run(path, path.stem) for path in self._ids("runs")), key=_creation_order)

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T:
        run = self.get_run(run_id)  # fail fast, before creating any lock file
        path = self._path("runs", run.id)
        return self._update("runs", path, lambda: self._load_run(path, run_id), mutate)

    # -- snapshots --------------------------------------------------------

    def save_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None:
        self._write(self._path("snapshots", run_id), {"format": DOC_FORMAT, "run_id": run_id, "snapshot": snapshot})

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None:
        path = self._path("snapshots", run_id)
        document = self._read(path, DOC_FORMAT)
        if document is None:
            return None
        snapshot = document.get("snapshot")
        if not isinstance(snapshot, dict):
            raise CorruptDocumentError(f"{path}: damaged snapshot document (no 'snapshot' object); move it aside")
        return snapshot

    # -- reviews ----------------------------------------------------------

    def put_review(self, review: Review) -> None:
        path = self._path("reviews", review.id)
        with self._locked("reviews"):
            self._write(path, review.to_dict())

    def _unknown_review(self, review_id: str) -> UnknownReviewError:
        known = [p.stem for p in self._ids("reviews")]
        hint = did_you_mean(review_id, known, n=3) or "; `loopbot status` lists the open reviews"
        return UnknownReviewError(f"no review {review_id!r}{hint}")

    def _load_review(self, path: Path, review_id: str) -> Review:
        document = self._read(path, REVIEW_FORMAT)
        if document is None:
            raise self._unknown_review(review_id)
        return self._decode(path, document, Review.from_dict)

    def get_review(self, review_id: str) -> Review:
        if _file_name(review_id) is None:
            raise self._unknown_review(review_id)
        return self._load_review(self._path("reviews", review_id), review_id)

    def list_reviews(self) -> list[Review]:
        return sorted((self._load_review(path, path.stem) for path in self._ids("reviews")), key=_creation_order)

    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T:
        review = self.get_review(review_id)  # unknown id -> error, and no lock file created
        path = self._path("reviews", review.id)
        return self._update("reviews", path, lambda: self._load_review(path, review_id), mutate)

    # -- ids --------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        """``<prefix>-<n>``, n counting from 1 and never reused, even after kill -9.

        The counter is saved before the id is returned, so a crash can skip a
        number but never hand the same one out twice.
        """
        path = self._path("counters", prefix)
        with self._locked("counters"):
            document = self._read(path, DOC_FORMAT)
            last = 0 if document is None else document.get("last")
            if not isinstance(last, int):
                raise CorruptDocumentError(f"{path}: damaged counter (no integer 'last'); move it aside")
            self._write(path, {"format": DOC_FORMAT, "prefix": prefix, "last": last + 1})
        return f"{prefix}-{last + 1}"

    # -- run-request inbox ------------------------------------------------

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str:
        request_id = self.next_id("request")
        document = {
            "format": DOC_FORMAT,
            "id": request_id,
            "kind": kind,
            "payload": payload,
            "created_at": self._clock().isoformat(),
        }
        self._write(self._path("inbox", request_id), document)
        return request_id

    def _load_request(self, path: Path, document: dict[str, Any]) -> Request:
        def build(doc: dict[str, Any]) -> Request:
            return Request(doc["id"], doc["kind"], dict(doc["payload"]), datetime.fromisoformat(doc["created_at"]))

        return self._decode(path, document, build)

    def take_requests(self) -> list[Request]:
        """Every pending request, oldest first; each stays until ``finish_request``.

        A damaged request file is renamed ``<name>.corrupt`` (and logged) rather
        than raised on every call: one bad file must not block every run asked for.
        """
        requests = []
        for path in self._ids("inbox"):
            try:
                document = self._read(path, DOC_FORMAT)
                if document is not None:  # finished by another thread since listing
                    requests.append(self._load_request(path, document))
            except CorruptDocumentError as err:
                aside = path.with_name(path.name + ".corrupt")
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, aside)
                    log.error("%s; moved it to %s, other requests go on", err, aside.name)
        return sorted(requests, key=lambda r: (_number(r.id), r.id))

    def finish_request(self, request_id: str) -> None:
        """Delete a handled request; finishing one twice is harmless."""
        path = self._path("inbox", request_id)
        try:
            path.unlink()
        except FileNotFoundError:
            return
        fsync_directory(path.parent)
