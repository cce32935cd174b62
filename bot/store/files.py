"""FileStore: the embedded default store, JSON documents under ``state_dir``.

Layout (one document per file, each written atomically through loop_engine.atomic):
``runs/<id>.json`` and ``reviews/<id>.json`` (the hot set: what the bot
still works on), ``archive/runs/<created>~<id>.json`` and
``archive/reviews/<run>~<id>.json`` (ended runs, applied or failed
reviews), ``snapshots/<run id>.json``, ``outbox/<task id>.json``,
``counters/<prefix>.json``, ``inbox/<request id>.json``,
``deliveries/<hash>.json`` and ``quarantine/<kind>/`` for documents that
could not be used. Read-modify-write is serialised by ``fcntl.flock`` on a
hidden ``.lock`` file per directory. File names are lower-cased ids, so
lookups are case-insensitive.

The questions asked every tick are answered from in-process indexes of the
hot directories (``index``: summaries, not documents), so an idle bot's cost
does not grow with the documents stored; a query reads the documents it
returns, and this process's own writes update the indexes without a listing.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from sys import intern  # summaries share their repeated strings: ten thousand runs, one "waiting"
from typing import Any, NamedTuple, TypeVar

from adapters.suggest import did_you_mean

from ..reviews import REVIEW_FORMAT, Cast, Review, VoteResult, cast_votes, next_deadline, replay_counted
from .base import (
    ACTIVE_RUN_STATUSES,
    HOT_REVIEW_STATUSES,
    NO_CLAIM,
    RUN_FORMAT,
    Claim,
    RunRecord,
    UnknownReviewError,
    UnknownRunError,
    posted_at,
)
from .collection import Collection, Spec, created_key, creation_order
from .documents import Quarantine, file_name, read_bytes
from .index import Entry
from .intake import IntakeFiles
from .journaled import JournaledCollection
from .outbox import OUTBOX_SPEC, OutboxFiles
from .snapshots import SnapshotFiles
from .watch import SETTLE_SECONDS

__all__ = ["FileStore"]

T = TypeVar("T")


class RunSummary(NamedTuple):
    ended: bool
    status: str
    loop: str
    order: tuple[datetime, int, str]
    trigger: str


class ReviewSummary(NamedTuple):
    ended: bool
    status: str
    order: tuple[datetime, int, str]
    deadline: datetime | None
    run_id: str
    checkpoint_id: str
    posted: tuple[str, ...]  # "<channel>|<key>=<value>" of its posts' data: where an id-less answer may belong


def _posted(review: Review) -> tuple[str, ...]:
    """The local channel is left out: an answer there always names its review (``loopbot decide ID``)."""
    return tuple(_place(str(post["channel"]), key, value)
                 for post in review.posts if post.get("channel") != "local" and isinstance(post.get("data"), dict)
                 for key, value in post["data"].items())


def _place(channel: str, key: str, value: Any) -> str:
    return f"{channel}|{key}={value!r}"


def _run_ended(run: RunRecord) -> bool:
    return run.status not in ACTIVE_RUN_STATUSES


def _run_active(run: RunRecord) -> bool:
    return run.status in ACTIVE_RUN_STATUSES


def _review_ended(review: Review) -> bool:
    return review.status not in HOT_REVIEW_STATUSES


def _due(review: Review, now: datetime) -> bool:
    deadline = next_deadline(review)
    return deadline is not None and deadline <= now


def _run_key(run_id: str) -> str:
    """The archive prefix of a run's reviews: its file stem, or a hash if that would make the name too long."""
    stem = file_name(run_id)
    if stem is not None and len(stem) <= 100:
        return stem
    return "h" + hashlib.sha256(run_id.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32]


RUN_SPEC: Spec[RunRecord] = Spec(
    kind="runs",
    noun="run",
    supported=RUN_FORMAT,
    from_dict=RunRecord.from_dict,
    summarize=lambda r: RunSummary(
        _run_ended(r), intern(r.status), intern(r.loop), creation_order(r), intern(r.trigger)
    ),
    ended=_run_ended,
    archive_prefix=lambda r: created_key(r.created_at),
)
REVIEW_SPEC: Spec[Review] = Spec(
    kind="reviews",
    noun="review",
    supported=REVIEW_FORMAT,
    from_dict=Review.from_dict,
    summarize=lambda r: ReviewSummary(
        _review_ended(r), intern(r.status), creation_order(r), next_deadline(r), _run_key(r.run_id),
        intern(r.checkpoint_id), _posted(r),
    ),
    ended=_review_ended,
    archive_prefix=lambda r: _run_key(r.run_id),
    fold=replay_counted,
)


def _ordered(live: Mapping[str, Entry[Any]], keep: Callable[[Any], bool]) -> list[str]:
    return [stem for _, stem in sorted((e.summary.order, s) for s, e in live.items() if keep(e.summary))]


def _deadlines(
    live: Mapping[str, Entry[ReviewSummary]],
) -> tuple[Mapping[str, Entry[ReviewSummary]], list[datetime], list[str]]:
    """(entries, deadlines ascending, their stems): due reviews are a prefix, found by bisection."""
    pairs = sorted((e.summary.deadline, e.summary.order, s) for s, e in live.items() if e.summary.deadline is not None)
    return live, [d for d, _, _ in pairs], [s for _, _, s in pairs]


#: Up to this many known ids, did-you-mean compares with every one; above, only with ids one edit away.
_FEW_IDS = 2000
_ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-_."


def _one_edit(word: str) -> set[str]:
    """Every string one deletion, transposition, substitution or insertion away from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in _ID_CHARS}
    edits |= {a + c + b for a, b in splits for c in _ID_CHARS}
    return edits


class FileStore(SnapshotFiles, IntakeFiles, OutboxFiles):
    """The ``Store`` on a directory; safe to share between threads and processes.

    ``clock`` dates requests and delivery keys; ``wall`` is the clock the
    index compares directory mtimes with (tests pass their own).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], datetime] | None = None,
        wall: Callable[[], float] = time.time,
        settle: float = SETTLE_SECONDS,
    ) -> None:
        self.root = Path(state_dir)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._quarantine = Quarantine(self.root)
        q, w = self._quarantine, self._write  # the bound method: a subclass's override sees every write
        self._runs = Collection(self.root, RUN_SPEC, q, write=w, wall=wall, settle=settle)
        self._reviews = JournaledCollection(self.root, REVIEW_SPEC, q, write=w, wall=wall, settle=settle)
        self._outbox = Collection(self.root, OUTBOX_SPEC, q, write=w, wall=wall, settle=settle)

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # -- runs -------------------------------------------------------------

    def _unknown_run(self, run_id: str) -> UnknownRunError:
        if file_name(run_id) is None:
            return UnknownRunError(f"no run {run_id!r}: run ids look like demo-run-3")
        return UnknownRunError(f"no run {run_id!r} in {self.root}; `loopbot status` lists the runs")

    def put_run(self, run: RunRecord) -> None:
        self._runs.put(run)

    def get_run(self, run_id: str) -> RunRecord:
        found = self._runs.find(run_id)
        if found is None:
            raise self._unknown_run(run_id)
        return found[1]

    def list_runs(self, *, archived: bool = False) -> list[RunRecord]:
        """The hot runs (in progress) in creation order; with ``archived`` the ended ones too (reads them all)."""
        loaded = self._runs.sync()
        runs = self._runs.fetch(self._runs.live(), keep=_run_active, loaded=loaded)
        if archived:
            runs += self._runs.archived_records()
        return sorted(runs, key=creation_order)

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T:
        """Change a run under the lock; a run that ends is archived by the same call."""
        return self._runs.update(run_id, mutate, self._unknown_run)

    def recent_runs(self, limit: int = 10) -> list[RunRecord]:
        """The ``limit`` latest-created ended runs, oldest first; reads about ``limit`` files.

        Archived run files are named by creation time, so the newest are the
        last names: ties on the boundary are read too, then ordered exactly.
        """
        if limit <= 0:
            return []
        ordered = self._runs.archived().ordered
        if not ordered:
            return []
        chosen = ordered[-limit:]
        boundary = chosen[0].split("~", 1)[0]
        start = len(ordered) - len(chosen)
        while start > 0 and ordered[start - 1].split("~", 1)[0] == boundary:
            start -= 1
        runs = []
        for name in ordered[start:]:
            path = self._runs.archive_dir / f"{name}.json"
            try:
                runs.append(self._runs.decode(path, read_bytes(path)))
            except (FileNotFoundError, ValueError):
                continue  # gone or unreadable: list_runs(archived=True) reports it
        return sorted(runs, key=creation_order)[-limit:]

    def active_runs(self) -> list[RunRecord]:
        """Runs in progress ("running", "waiting"), in creation order; reads those runs and no other file."""
        self._runs.upkeep()
        stems = self._runs.view("active", lambda live: _ordered(live, lambda s: s.status in ACTIVE_RUN_STATUSES))
        return self._runs.fetch(stems, keep=_run_active)

    def active_run(self, loop: str) -> RunRecord | None:
        """The run in progress of ``loop``, if any (the oldest, should there be several); reads that one file."""
        self._runs.upkeep()

        def by_loop(live: Mapping[str, Entry[RunSummary]]) -> dict[str, list[str]]:
            stems: dict[str, list[str]] = {}
            for stem in _ordered(live, lambda s: s.status in ACTIVE_RUN_STATUSES):
                stems.setdefault(live[stem].summary.loop, []).append(stem)
            return stems

        for stem in self._runs.view("active-by-loop", by_loop).get(loop, []):
            for run in self._runs.fetch([stem], keep=lambda r: _run_active(r) and r.loop == loop):
                return run
        return None

    def run_with_trigger(self, trigger: str) -> RunRecord | None:
        """The newest hot run started by ``trigger`` (e.g. an inbox request id), to make intake idempotent."""
        self._runs.upkeep()
        live = self._runs.live()
        matches = sorted((e.summary.order, s) for s, e in live.items() if e.summary.trigger == trigger)
        for _, stem in reversed(matches):
            for run in self._runs.fetch([stem], keep=lambda r: _run_active(r) and r.trigger == trigger):
                return run
        return None

    def claim_run(self, run_id: str) -> Claim | None:
        """Always granted: one ``serve`` per state dir (the serve lock), whose runner serialises its threads."""
        return NO_CLAIM

    # -- reviews ----------------------------------------------------------

    def _unknown_review(self, review_id: str) -> UnknownReviewError:
        close = self._close_review_ids(review_id)
        hint = did_you_mean(review_id, close, n=3) or "; `loopbot status` lists the open reviews"
        return UnknownReviewError(f"no review {review_id!r}{hint}", close)

    def _close_review_ids(self, review_id: str) -> list[str]:
        """Ids worth offering for a mistyped one: all when few, else those one edit away (an O(1) look-up each).

        did-you-mean compares the word with every candidate; over 20,000 ids
        that took 200 ms, for a typo that is nearly always one edit.
        """
        hot, archived = self._reviews.live(), self._reviews.archived().by_stem
        if len(hot) + len(archived) <= _FEW_IDS:
            return [*hot, *archived]
        return [v for v in _one_edit(review_id.strip().lower()) if v in hot or v in archived]

    def put_review(self, review: Review) -> None:
        self._reviews.put(review)

    def get_review(self, review_id: str) -> Review:
        found = self._reviews.find(review_id)
        if found is None:
            raise self._unknown_review(review_id)
        return found[1]

    def peek_review(self, review_id: str) -> Review:
        return self._reviews.peek(review_id) or self.get_review(review_id)

    def list_reviews(self, *, archived: bool = False) -> list[Review]:
        """Open and decided reviews in creation order; with ``archived`` the applied and failed ones too."""
        loaded = self._reviews.sync()
        reviews = self._reviews.fetch(self._reviews.live(), keep=lambda r: not _review_ended(r), loaded=loaded)
        if archived:
            reviews += self._reviews.archived_records()
        return sorted(reviews, key=creation_order)

    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T:
        """Change a review under the lock; one that becomes applied or failed is archived by the same call."""
        return self._reviews.update(review_id, mutate, self._unknown_review)

    def cast_votes(self, batch: Mapping[str, Sequence[Cast]]) -> dict[str, list[VoteResult] | Exception]:
        """Votes that only count go to the reviews' journal, all in one append (``journaled``)."""
        return self._reviews.update_many(
            {review_id: partial(cast_votes, casts=casts) for review_id, casts in batch.items()}, self._unknown_review
        )

    def _stems_with(self, status: str) -> list[str]:
        """The hot reviews of ``status`` in creation order, from the index (no file read)."""
        self._reviews.upkeep()
        return self._reviews.view(status, lambda live: _ordered(live, lambda s: s.status == status))

    def _reviews_with(self, status: str, limit: int | None = None) -> list[Review]:
        return self._reviews.fetch(self._stems_with(status), keep=lambda r: r.status == status, limit=limit)

    def open_reviews(self, limit: int | None = None) -> list[Review]:
        """Reviews waiting for people, in creation order (the first ``limit``: reads only those)."""
        return self._reviews_with("open", limit)

    def open_reviews_posted_at(self, channel: str, context: Mapping[str, Any]) -> list[Review]:
        """Reads only the open reviews whose summary names every item of ``context`` on ``channel``."""
        wanted = {_place(channel, key, value) for key, value in context.items()}
        open_stems = self._stems_with("open")
        live = self._reviews.live()
        stems = [stem for stem in open_stems
                 if stem in live and all(place in live[stem].summary.posted for place in wanted)]
        return self._reviews.fetch(stems, keep=lambda r: r.status == "open" and posted_at(r, channel, context))

    def decided_reviews(self) -> list[Review]:
        """Reviews with an outcome the runner has not applied yet, in creation order."""
        return self._reviews_with("decided")

    def due_reviews(self, now: datetime) -> list[Review]:
        """Open reviews with a deadline action due at ``now``, in creation order; costs what is due."""
        self._reviews.upkeep()
        live, times, stems = self._reviews.view("deadlines", _deadlines)
        due = sorted(stems[: bisect.bisect_right(times, now)], key=lambda s: live[s].summary.order)
        return self._reviews.fetch(due, keep=lambda r: _due(r, now))

    def next_deadline(self) -> datetime | None:
        """The earliest deadline among open reviews (None: nothing will ever be due)."""
        self._reviews.upkeep()
        _, times, _ = self._reviews.view("deadlines", _deadlines)
        return times[0] if times else None

    def review_for_run(self, run_id: str, checkpoint_id: str | None = None) -> Review | None:
        """The newest review of ``run_id`` (at ``checkpoint_id`` if given), hot or archived."""
        key = _run_key(run_id)
        live = self._reviews.live()
        candidates = self._reviews.fetch(
            s for s, e in live.items()
            if e.summary.run_id == key and (checkpoint_id is None or e.summary.checkpoint_id == checkpoint_id)
        )
        for stem in self._reviews.archived().with_prefix(key):
            found = self._reviews.find(stem)
            if found is not None and stem not in live:
                candidates.append(found[1])
        matching = [
            r
            for r in candidates
            if _run_key(r.run_id) == key and (checkpoint_id is None or r.checkpoint_id == checkpoint_id)
        ]
        return max(matching, key=creation_order, default=None)

    # -- health -----------------------------------------------------------

    def counts(self) -> dict[str, Any]:
        """Hot runs by status, open and decided reviews, pending tasks: no file read while nothing changed."""
        self._runs.upkeep()
        self._reviews.upkeep()
        runs = self._runs.view("by-status", lambda live: dict(Counter(e.summary.status for e in live.values())))
        reviews = self._reviews.view("by-status", lambda live: Counter(e.summary.status for e in live.values()))
        return {
            "runs": dict(runs),
            "open_reviews": reviews.get("open", 0),
            "decided_reviews": reviews.get("decided", 0),
            "outbox_pending": self._outbox_pending(),
        }

    def problems(self) -> list[str]:
        """Documents set aside or unreadable, '<kind>/<file>: why', for ``status`` and /healthz."""
        for collection in (self._runs, self._reviews, self._outbox):
            collection.upkeep()
        found = self._quarantine.problems()
        # counters and inbox requests set aside as <name>.corrupt* (intake): small directories, cheap to list
        for kind, what in (("counters", "counting resumed past the ids in use"), ("inbox", "the request was dropped")):
            directory = self.root / kind
            if directory.is_dir():
                found += [f"{kind}/{name}: damaged, set aside ({what}); repair or delete it"
                          for name in sorted(os.listdir(directory)) if ".json.corrupt" in name]
        return found

    def _used_ids(self) -> Iterator[str]:
        """Every id in use by a stored document (for a counter that must resume past them)."""
        for collection in (self._runs, self._reviews):
            yield from collection.hot.current()[1]
            yield from collection.archived().by_stem
        for directory in (self.root / "inbox", *self._quarantine.root.glob("*")):
            if directory.is_dir():
                for name in os.listdir(directory):
                    yield name.split(".json", 1)[0]
