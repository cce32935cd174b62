"""The Store contract: what the bot keeps durably, as small contracts ``Store`` joins, and the errors it raises.

Code outside ``bot/store`` sees only these Protocols and records; the SQL
store passes tests/bot/store/test_store_contract.py on each engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import re
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..review_records import Review
from ..reviews import Cast, VoteResult

if TYPE_CHECKING:  # pragma: no cover - annotations only: listing runs and reviews needs no engine state
    from loop_engine.types import LoopState

__all__ = ["RUN_FORMAT", "StoreError", "UnknownRunError", "UnknownReviewError", "UnknownTaskError",
    "CorruptDocumentError", "NewerFormatError", "RunRecord", "Request", "OutboxTask", "TASK_FORMAT",
    "ACTIVE_RUN_STATUSES", "HOT_REVIEW_STATUSES", "Store", "RunStore", "ReviewStore", "OutboxStore", "DeliveryStore",
    "CounterStore", "RequestStore", "Claim", "NO_CLAIM"]

T = TypeVar("T")

#: Format version written into every stored run record.
RUN_FORMAT = 1
#: Runs in these statuses are in progress; any other status has ended and leaves the hot set.
ACTIVE_RUN_STATUSES = ("running", "waiting")
#: Reviews in these statuses still need the bot (votes, deadlines, an outcome to apply); others are archived.
HOT_REVIEW_STATUSES = ("open", "decided")
#: Format version written into every outbox task.
TASK_FORMAT = 1
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")


def task_stem(task_id: str) -> str | None:
    """A task id is its own key, kept as given (callers choose ids and compare them exactly): only safe ones."""
    return task_id if isinstance(task_id, str) and _TASK_ID.fullmatch(task_id) and ".." not in task_id else None


class StoreError(Exception):
    """The store cannot do what was asked; the message says what and where."""


class UnknownRunError(StoreError, LookupError):
    """No run has this id."""


class UnknownReviewError(StoreError, LookupError):
    """No review has this id; the message lists close ids when there are some. ``close``: the ids it picked
    them from, for a caller that may show only some (the vote path names only reviews the voter may answer)."""

    def __init__(self, message: str, close: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.close = tuple(close)


class UnknownTaskError(StoreError, KeyError):
    """No pending outbox task has this id (``args[0]``, as KeyError has it): it was finished, or never added."""

    def __str__(self) -> str:  # KeyError would show the bare id, in quotes
        return f"no pending task {self.args[0]!r} (finished, or never added)" if self.args else ""


class CorruptDocumentError(StoreError, ValueError):
    """A stored document cannot be read; the message names the file."""


class NewerFormatError(StoreError, ValueError):
    """A stored document was written by a newer loopbot; the message names file and versions."""


def _document(record: Any, version: int) -> dict[str, Any]:
    """A record as its stored JSON document: the format it is written in, then its fields, times as ISO text."""
    document: dict[str, Any] = {"format": version}
    for item in fields(record):
        value = getattr(record, item.name)
        document[item.name] = value.isoformat() if isinstance(value, datetime) else value
    return document


def _from_document(cls: type[T], kind: str, data: dict[str, Any], supported: int) -> T:
    """The record of a document ``_document`` wrote: a field with a default may be absent, times are ISO text."""
    version = data.get("format")
    if not isinstance(version, int) or version > supported:
        raise ValueError(f"{kind} format {version!r} is not one this loopbot reads (up to {supported});"
                         " upgrade loopbot")
    values: dict[str, Any] = {}
    for item in fields(cls):  # type: ignore[arg-type]  # every caller passes a dataclass
        if item.name not in data and item.default is not MISSING:
            continue
        value = data[item.name]
        if value is not None and "datetime" in str(item.type):
            value = datetime.fromisoformat(value)
        values[item.name] = int(value) if item.type == "int" else value
    return cls(**values)


@dataclass
class RunRecord:
    """One run of a loop as the bot tracks it (the engine's own state is the snapshot)."""

    id: str
    loop: str
    status: str
    created_at: datetime
    updated_at: datetime
    trigger: str
    review_id: str | None = None
    iterations: int = 0
    reason: str | None = None
    result: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return _document(self, RUN_FORMAT)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        return _from_document(cls, "run", data, RUN_FORMAT)


@dataclass
class Request:
    """Work handed to the running ``serve`` (e.g. kind "run", payload {"loop": "demo"})."""

    id: str
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None


@dataclass
class OutboxTask:
    """Something a channel's delivery thread must deliver (post, update, ...), kept until ``finish_tasks``.

    Durable so a crash between deciding to post and posting loses nothing.
    ``id`` is the caller's, deterministic ("demo-1.post.slack-c0123"), so
    adding the same task twice is a no-op rather than a double post.
    """

    id: str
    channel: str
    action: str
    review_id: str | None
    payload: dict[str, Any]
    created_at: datetime
    attempts: int = 0
    not_before: datetime | None = None
    last_error: str | None = None

    def __post_init__(self) -> None:
        if task_stem(self.id) is None:
            raise StoreError(f"invalid task id {self.id!r}: use letters, digits, '.', '_', '-' or ':' "
                             "(up to 200, e.g. demo-1.post.slack-c0123)")

    @property
    def ready_at(self) -> datetime:
        """When a delivery thread may try it: ``not_before`` if set, else as soon as it was created."""
        return self.not_before if self.not_before is not None else self.created_at

    def to_dict(self) -> dict[str, Any]:
        return _document(self, TASK_FORMAT)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutboxTask:
        task = _from_document(cls, "task", data, TASK_FORMAT)
        if not isinstance(task.payload, dict):
            raise TypeError(f"task payload must be an object, not {type(task.payload).__name__}")
        return task


class Claim(Protocol):
    """The right to execute one run, held until ``release()`` (or until the holding process dies)."""

    def release(self) -> None: ...

    def held(self) -> bool:
        """False once the claim is lost while this process lives on: another replica may claim the run now,
        so this one must write nothing more of it."""


class _NoClaim:
    """The claim of a store used by one process: the runner's own bookkeeping already serialises its threads."""

    def release(self) -> None:
        return None

    def held(self) -> bool:
        return True


#: What a one-process store's ``claim_run`` returns: always granted, nothing to release.
NO_CLAIM: Claim = _NoClaim()


class RunStore(Protocol):
    """Runs and their engine snapshots."""

    def put_run(self, run: RunRecord) -> None: ...
    def get_run(self, run_id: str) -> RunRecord: ...
    def list_runs(self, *, archived: bool = False) -> list[RunRecord]: ...
    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T: ...
    def recent_runs(self, limit: int = 10) -> list[RunRecord]: ...
    def active_runs(self, *, status: str | None = None) -> list[RunRecord]: ...
    def active_run(self, loop: str) -> RunRecord | None: ...
    def run_with_trigger(self, trigger: str) -> RunRecord | None: ...

    def run_counts(self) -> dict[tuple[str, str], int]:
        """Every run ever stored, ended ones included, by (loop, status): one aggregate, for /metrics."""

    def claim_run(self, run_id: str) -> Claim | None:
        """The right to execute (start, resume, continue) ``run_id``, or None while another process holds it:
        replicas on one store never run one run twice. A claim whose holder died is free again."""

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None: ...
    def save_state(self, run_id: str, state: LoopState) -> None: ...
    def load_state(self, run_id: str) -> LoopState | None: ...


class ReviewStore(Protocol):
    """Reviews and their votes."""

    def put_review(self, review: Review) -> None: ...
    def get_review(self, review_id: str, *, history: bool = True, votes: bool = True) -> Review:
        """``history=False``: without history and delivery keys; ``votes=False`` too: without the current votes
        (checking a voter costs the same whatever the voters). Other reads give every current vote, in order."""
        ...
    def get_reviews(self, review_ids: Sequence[str]) -> dict[str, Review]:
        """Each review found, by the id as given, as ``get_review(id, history=False, votes=False)`` reads it, in
        one read: the vote path reads the reviews of all the replies waiting at once. Unknown, damaged: absent."""
        ...
    def list_reviews(self, *, archived: bool = False, history: bool = True, request: bool = True) -> list[Review]:
        """Without histories and delivery keys (``history=False``) or the requests, most of a review (``request``)."""
        ...
    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T: ...

    def cast_votes(self, batch: Mapping[str, Sequence[Cast]]) -> dict[str, list[VoteResult] | Exception]:
        """Cast each review's votes in order (``bot.reviews.cast_votes``), the whole batch in one transaction.

        A review that cannot be found or changed fails alone: its exception
        stands in place of its results. When the transaction cannot be
        committed every review's result is that error: no vote is acknowledged.
        It reads only what ``bot.reviews.cast_votes`` needs: the same cost whatever the votes and voters before.
        """
        ...

    def open_reviews(self, limit: int | None = None) -> list[Review]:
        """The oldest ``limit`` open reviews as ``list_reviews(history=False, request=False)`` reads them (their
        readers use the current votes, the policy and the posts): they cost the same whatever votes or proposal."""
        ...

    def open_reviews_posted_at(self, channel: str, context: Mapping[str, Any]) -> list[Review]:
        """Open reviews with a post on ``channel`` whose message data holds every item of ``context``:
        where an answer without a review id belongs (a Slack thread, a GitHub issue). As ``get_review(id,
        history=False, votes=False)`` reads them: finding costs the same however many votes came."""
        ...

    def decided_reviews(self) -> list[Review]: ...
    def due_reviews(self, now: datetime) -> list[Review]: ...
    def review_for_run(self, run_id: str, checkpoint_id: str | None = None) -> Review | None: ...
    def counts(self) -> dict[str, Any]: ...


class OutboxStore(Protocol):
    """Tasks channels' delivery threads deliver, kept until they are done."""

    def add_task(self, task: OutboxTask) -> bool: ...
    def due_tasks(self, channel: str, now: datetime, limit: int = 50) -> list[OutboxTask]: ...
    def next_task_at(self, channel: str) -> datetime | None: ...
    def pending_tasks(self, review_id: str | None = None) -> list[OutboxTask]: ...
    def failing_tasks(self, limit: int) -> tuple[list[OutboxTask], int]: ...
    def update_task(self, task_id: str, mutate: Callable[[OutboxTask], T]) -> T: ...
    def finish_tasks(self, task_ids: Sequence[str]) -> None:
        """The tasks are done: gone, in one write (the outbox finishes a round's deliveries together)."""

    def outbox_backlog(self) -> dict[str, int]:
        """Tasks not delivered yet by channel (channels with none are absent): one aggregate, for /metrics."""


class DeliveryStore(Protocol):
    """Dedupe keys: each webhook delivery or polled comment is acted on once, and its votes are not lost."""

    def record_deliveries(self, batch: Sequence[tuple[str, list[dict[str, Any]] | None]]) -> list[bool]:
        """Of each (key, work): True the first time ``key`` is seen, False after; in one write (one fsync for a
        burst), all or none. ``work`` (a delivery's votes) is recorded with it and waits in ``pending_deliveries``
        until ``finish_deliveries``: the sender is answered before the votes are cast, and a crash in between
        loses none of them."""

    def pending_deliveries(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """(key, work) of every delivery recorded with work and not finished, oldest first."""

    def finish_deliveries(self, keys: Sequence[str], answers: Sequence[OutboxTask] = ()) -> None:
        """The deliveries' work is done and ``answers`` (its voters') are queued: one write for a batch.

        Finishing twice, or a key without work, is harmless; an answer whose id is pending is added once.
        """


class CounterStore(Protocol):
    """Id counters: ``next_id("triage")`` is ``triage-<n>``, never the same twice across processes."""

    def next_id(self, prefix: str) -> str: ...


class RequestStore(Protocol):
    """The run-request inbox: work handed to the running ``serve``, kept until it says it is done."""

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str: ...
    def take_requests(self) -> list[Request]: ...
    def finish_request(self, request_id: str) -> None: ...


class Store(RunStore, ReviewStore, OutboxStore, DeliveryStore, CounterStore, RequestStore, Protocol):
    """Durable state of one bot. Every write is one transaction, committed before the method returns.

    ``update_*`` run ``mutate`` on the current record in a transaction that
    serialises threads and processes and return its result only once written:
    an acknowledged change survives kill -9. Ended runs and reviews are
    archived by the write that ends them, so what a tick or a status asks
    costs what there is to do, not the history kept (``get_*`` and
    ``list_*(archived=True)`` still see the archive).
    """

    #: Where the store keeps its state, for messages (the database file, or the PostgreSQL URL without password).
    where: str

    def problems(self) -> list[str]:
        """What is wrong with the stored data (damaged rows, each named), for ``status`` and /healthz."""
