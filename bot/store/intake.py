"""Id counters (``counters/<prefix>.json``), the run-request inbox (``inbox/``) and intake dedupe keys.

Mixed into ``FileStore``. A request is identified by its file name, never
by the id inside it: a request whose content says ``"../../evil"`` is still
``request-3`` and can be finished (issue 12.5). A damaged counter is set
aside and counting resumes past every id of that prefix already in use, so
a bad file neither blocks a decision nor hands out an id twice (issue 12.7).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from functools import cached_property
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from loop_engine.atomic import fsync_directory

from .base import CorruptDocumentError, Request, StoreError
from .collection import number
from .documents import DocumentWriter, file_name, locked, read_document, remove
from .journal import DeliveryJournal, journal_for

__all__ = ["IntakeFiles", "DOC_FORMAT"]

log = logging.getLogger("bot.store.files")

#: Format of the small documents this module owns (counters, requests, delivery keys).
DOC_FORMAT = 1
#: The journal of deliveries recorded with work, until it is done (under ``deliveries/``).
JOURNAL = "pending.jsonl"


class IntakeFiles(DocumentWriter):
    """Counters, inbox and delivery keys of ``FileStore`` (``root``, ``_clock``, ``_used_ids`` come from it)."""

    root: Path
    _clock: Callable[[], datetime]
    _used_ids: Callable[[], Iterable[str]]

    def _doc_path(self, kind: str, doc_id: str) -> Path:
        name = file_name(doc_id)
        if name is None:
            raise StoreError(f"invalid {kind} id {doc_id!r}: use letters, digits, '-', '_' or '.' (e.g. triage-17)")
        return self.root / kind / f"{name}.json"

    # -- ids ------------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        """``<prefix>-<n>``, n counting from 1 and never reused, even after kill -9.

        The counter is saved before the id is returned, so a crash can skip a
        number but never hand the same one out twice.
        """
        path = self._doc_path("counters", prefix)
        with locked(path.parent):
            try:
                document = read_document(path, DOC_FORMAT)
                last = 0 if document is None else document.get("last")
                if isinstance(last, bool) or not isinstance(last, int) or last < 0:
                    raise CorruptDocumentError(f"{path}: damaged counter (no integer 'last')")
            except CorruptDocumentError as err:
                last = self._recover_counter(path, prefix, err)
            self._write(path, {"format": DOC_FORMAT, "prefix": prefix, "last": last + 1})
        return f"{prefix}-{last + 1}"

    def _recover_counter(self, path: Path, prefix: str, err: Exception) -> int:
        """Set a damaged counter aside; the highest number of this prefix in use is where counting resumes."""
        aside = path.with_name(path.name + ".corrupt")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}.corrupt{n}")
        os.replace(path, aside)
        fsync_directory(path.parent)
        pattern = re.compile(re.escape(prefix.strip().lower()) + r"-(\d+)")
        used = [int(m.group(1)) for stem in self._used_ids() if (m := pattern.fullmatch(stem))]
        last = max(used, default=0)
        log.error("%s; moved it to %s and counting on from %s-%d, the highest in use", err, aside.name, prefix, last)
        return last

    # -- run-request inbox ----------------------------------------------------

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str:
        request_id = self.next_id("request")
        document = {
            "format": DOC_FORMAT,
            "id": request_id,
            "kind": kind,
            "payload": payload,
            "created_at": self._clock().isoformat(),
        }
        self._write(self._doc_path("inbox", request_id), document)
        return request_id

    def take_requests(self) -> list[Request]:
        """Every pending request, oldest first; each stays until ``finish_request``.

        A damaged request file is renamed ``<name>.corrupt`` (and logged) rather
        than raised on every call: one bad file must not block every run asked for.
        """
        directory = self.root / "inbox"
        if not directory.is_dir():
            return []
        requests = []
        for path in sorted(p for p in directory.iterdir() if p.suffix == ".json" and not p.name.startswith(".")):
            try:
                document = read_document(path, DOC_FORMAT)
                if document is not None:  # finished by another thread since listing
                    requests.append(self._request(path, document))
            except CorruptDocumentError as err:
                aside = path.with_name(path.name + ".corrupt")
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, aside)
                    log.error("%s; moved it to %s, other requests go on", err, aside.name)
        return sorted(requests, key=lambda r: (number(r.id), r.id))

    @staticmethod
    def _request(path: Path, doc: dict[str, Any]) -> Request:
        """The request in ``doc``, identified by its file name whatever id its content claims."""
        if file_name(path.stem) != path.stem:
            raise CorruptDocumentError(f"{path}: not a request file name (request-<n>.json); move it aside")
        try:
            payload = doc["payload"]
            if not isinstance(payload, dict) or not isinstance(doc["kind"], str):
                raise TypeError("kind must be a string and payload an object")
            return Request(path.stem, doc["kind"], dict(payload), datetime.fromisoformat(doc["created_at"]))
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptDocumentError(
                f"{path}: damaged document ({type(err).__name__}: {err}); restore it or move it aside"
            ) from err

    def finish_request(self, request_id: str) -> None:
        """Delete a handled request; finishing one twice is harmless."""
        remove(self._doc_path("inbox", request_id))

    # -- intake dedupe and queued work ---------------------------------------------

    def _done_path(self, key: str) -> Path:
        """Where a delivery is kept once seen (finished): the file name is a hash, so any string is a key."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        return self.root / "deliveries" / digest[:2] / f"{digest}.json"

    @cached_property
    def _journal(self) -> DeliveryJournal:
        """Looked up once: resolving the path on every delivery cost more than its fsync."""
        return journal_for(self.root / "deliveries" / JOURNAL, lambda key: self._done_path(key).exists())

    def record_delivery(self, key: str, work: list[dict[str, Any]] | None = None) -> bool:
        """True the first time ``key`` (a webhook delivery id, a Slack event id) is seen, False after.

        Durable (a redelivery after a restart is still recognised). A delivery
        with work is appended to ``deliveries/pending.jsonl`` (``journal``:
        concurrent webhooks share one fsync) until ``finish_delivery``; one
        without work gets its file at once.
        """
        done = self._done_path(key)
        if done.exists():
            return False
        if work is not None:
            return self._journal.add(key, self._clock().isoformat(), work)
        if self._journal.has(key):
            return False
        with locked(self.root / "deliveries"):
            if done.exists():
                return False
            self._write(done, {"format": DOC_FORMAT, "key": key, "at": self._clock().isoformat()})
        return True

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Deliveries whose work is not done, oldest first."""
        return self._journal.pending()

    def finish_delivery(self, key: str) -> None:
        """Record the delivery as done (a redelivery is still refused), then let the journal forget it."""
        if not self._journal.has(key):
            return
        done = self._done_path(key)
        if not done.exists():
            self._write(done, {"format": DOC_FORMAT, "key": key, "at": self._clock().isoformat()})
        self._journal.finish(key)
