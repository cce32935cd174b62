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
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from loop_engine.atomic import fsync_directory

from .base import CorruptDocumentError, Request, StoreError
from .collection import number
from .documents import DocumentWriter, create_once, encode, file_name, locked, read_document, remove

__all__ = ["IntakeFiles", "DOC_FORMAT"]

log = logging.getLogger("bot.store.files")

#: Format of the small documents this module owns (counters, requests, delivery keys).
DOC_FORMAT = 1
#: Where deliveries recorded with work wait until it is done (under ``deliveries/``).
PENDING = "pending"


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

    def _delivery_paths(self, key: str) -> tuple[Path, Path]:
        """(where a finished delivery is kept, where one with work waits): the name is a hash of the key."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        deliveries = self.root / "deliveries"
        return deliveries / digest[:2] / f"{digest}.json", deliveries / PENDING / f"{digest}.json"

    def record_delivery(self, key: str, work: list[dict[str, Any]] | None = None) -> bool:
        """True the first time ``key`` (a webhook delivery id, a Slack event id) is seen, False after.

        Durable (a redelivery after a restart is still recognised); the file
        name is a hash, so any string is a valid key. A delivery with work
        waits in ``deliveries/pending/`` - one small atomic write on the
        webhook's path - until ``finish_delivery`` moves it among the others.
        """
        done, pending = self._delivery_paths(key)
        # pending first: finish_delivery moves pending -> done, so this order never misses both
        if pending.exists() or done.exists():
            return False
        document: dict[str, Any] = {"format": DOC_FORMAT, "key": key, "at": self._clock().isoformat()}
        if work is not None:
            document["work"] = work
        return create_once(done if work is None else pending, encode(document))

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Deliveries whose work is not done, oldest first; a damaged one is set aside, not raised each time."""
        directory = self.root / "deliveries" / PENDING
        if not directory.is_dir():
            return []
        found = []
        for path in directory.iterdir():
            if path.suffix != ".json" or path.name.startswith("."):
                continue
            try:
                document = read_document(path, DOC_FORMAT)
                if document is None:  # finished since listing
                    continue
                key, work, at = document["key"], document["work"], document["at"]
                if not isinstance(key, str) or not isinstance(work, list) or not isinstance(at, str):
                    raise TypeError("key and at must be strings and work a list")
                found.append((at, key, work))
            except (CorruptDocumentError, KeyError, TypeError) as err:
                aside = path.with_name(path.name + ".corrupt")
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, aside)
                    log.error("%s: damaged queued delivery (%s); moved it to %s, the others go on", path, err,
                              aside.name)
        return [(key, work) for _at, key, work in sorted(found, key=lambda item: item[0])]

    def finish_delivery(self, key: str) -> None:
        """Move the delivery among the finished ones: still known (a redelivery is refused), no longer pending."""
        done, pending = self._delivery_paths(key)
        with locked(self.root / "deliveries"):
            if not pending.exists():
                return
            done.parent.mkdir(parents=True, exist_ok=True)
            os.replace(pending, done)
            fsync_directory(done.parent)
            fsync_directory(pending.parent)
