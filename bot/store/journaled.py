"""Reviews as files plus a vote journal: a batch of counted votes costs one append and one fsync.

``JournaledCollection`` is a ``Collection`` whose hot records are their
document plus their lines in ``votes.jsonl`` (``vote_journal``), folded in
wherever a hot record is read. ``update_many`` lets the mutations of a
batch say "the journal can carry my change" - then the record is not
rewritten, its change is appended with every other record's in one write -
and otherwise writes the record as ``update`` does. When the journal is
long the same lock hold folds the records with the most lines into their
documents and drops their lines from the journal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .base import StoreError
from .collection import Collection, R, Spec
from .documents import Quarantine
from .index import Changes, file_key
from .vote_journal import COMPACT_AT, FOLD_AT_ONCE, VoteJournal

__all__ = ["JournaledCollection", "JournalLines"]

log = logging.getLogger("bot.store.files")

T = TypeVar("T")

#: What a mutation of ``update_many`` returns with its result: the lines that carry its change ([]: it changed
#: nothing), or None when the journal cannot carry it and the record is written.
JournalLines = list[dict[str, Any]] | None


class JournaledCollection(Collection[R]):
    """A collection whose spec has ``fold``: how a record takes its journal lines."""

    def __init__(self, root: Path, spec: Spec[R], quarantine: Quarantine, **options: Any) -> None:
        super().__init__(root, spec, quarantine, **options)
        assert spec.fold is not None, "a journaled collection folds its journal lines into its records"
        self._fold = spec.fold
        self.journal = VoteJournal(self.hot_dir / "votes.jsonl")
        self.compact_at = COMPACT_AT
        self.fold_at_once = FOLD_AT_ONCE

    # -- reading: every hot record with its lines -------------------------------------

    def _folded(self, stem: str, record: R) -> R:
        lines = self.journal.lines(stem)
        if lines:
            self._fold(record, lines)
        return record

    def _reading(self) -> None:
        self.journal.refresh()

    # -- writing ------------------------------------------------------------------------

    def update_many(
        self,
        mutations: Mapping[str, Callable[[R], tuple[T, JournalLines]]],
        unknown: Callable[[str], Exception],
    ) -> dict[str, T | Exception]:
        """``update`` of each record under one lock hold; the changes the journal can carry in one append.

        A record that cannot be found or read, or whose mutation raises,
        fails alone (its exception in place of its result). So does every
        journaled record when the append fails: nothing of theirs is kept.
        """
        results: dict[str, T | Exception] = {}
        with self.writing() as changes:
            self.journal.refresh()
            appended: list[tuple[str, dict[str, Any]]] = []
            carried: dict[str, tuple[str, R]] = {}  # stem -> (doc id, record changed in memory only)
            for doc_id, mutate in mutations.items():
                try:
                    stem = self.spec.name_of(doc_id)
                    if stem is None:
                        raise unknown(doc_id)
                    path, record = self._fresh(doc_id, stem, unknown)
                    hot = path == self.hot_dir / f"{stem}.json"
                    before = {} if hot else record.to_dict()  # archived (rare): written only if it changed
                    results[doc_id], lines = mutate(record)
                    if lines is None or not hot:
                        self._write_changed(changes, doc_id, stem, path, record, before)
                    elif lines:
                        appended += [(stem, line) for line in lines]
                        carried[stem] = (doc_id, record)
                    else:  # unchanged: kept as it is
                        self._recent.keep(stem, file_key(path), record)
                except Exception as err:  # noqa: BLE001 - that record's failure, handed to its caller
                    results[doc_id] = err
            if appended:
                self._append(changes, appended, carried, results)
            if len(self.journal) >= self.compact_at:
                try:
                    self._compact(changes)
                except (OSError, StoreError) as err:  # the votes are recorded; the next batch folds again
                    log.warning("%s: could not fold vote lines into their reviews (%s); trying again later",
                                self.journal.path, err)
        return results

    def _append(
        self,
        changes: Changes[R],
        appended: list[tuple[str, dict[str, Any]]],
        carried: dict[str, tuple[str, R]],
        results: dict[str, Any],
    ) -> None:
        changes.started = True  # counted, so another process's kept records and indexes see a write
        try:
            self.journal.append(appended)
        except OSError as err:
            for doc_id, _record in carried.values():
                results[doc_id] = err
            return
        for stem, (_doc_id, record) in carried.items():  # the document is as it was: the record is it + lines
            self._recent.keep(stem, file_key(self.hot_dir / f"{stem}.json"), record)

    def _compact(self, changes: Changes[R]) -> None:
        """Write the hot records with the most lines with them folded in; a new journal without their lines."""
        stems = sorted(self.journal.stems(), key=lambda stem: len(self.journal.lines(stem)), reverse=True)
        folded = stems[: self.fold_at_once]
        for stem in folded:
            hot = self.hot_dir / f"{stem}.json"
            kept = self._recent.take(stem, file_key(hot))
            found = (hot, kept) if kept is not None else self.find(stem)
            if found is None or found[0] != hot:  # gone or archived: its document was written folded
                continue
            self._write_changed(changes, stem, stem, hot, found[1], before={})
        self.journal.drop(folded)
