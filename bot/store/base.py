"""The Store contract: what the bot keeps durably, and the errors it raises.

Runs (with their engine snapshot), reviews, id counters and the run-request
inbox. Every implementation (``FileStore`` now, a SQL store later) passes
tests/bot/store/test_store_contract.py; code outside ``bot/store`` sees only
this Protocol and these records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ..reviews import Review

__all__ = [
    "RUN_FORMAT",
    "RUN_STATUSES",
    "StoreError",
    "UnknownRunError",
    "UnknownReviewError",
    "CorruptDocumentError",
    "NewerFormatError",
    "RunRecord",
    "Request",
    "Store",
]

T = TypeVar("T")

#: Format version written into every stored run record.
RUN_FORMAT = 1
#: The run statuses the CLI and ``status --json`` show; more may be added.
RUN_STATUSES = ("running", "waiting", "completed", "failed", "rejected")


class StoreError(Exception):
    """The store cannot do what was asked; the message says what and where."""


class UnknownRunError(StoreError, LookupError):
    """No run has this id."""


class UnknownReviewError(StoreError, LookupError):
    """No review has this id; the message lists close ids when there are some."""


class CorruptDocumentError(StoreError, ValueError):
    """A stored document cannot be read; the message names the file."""


class NewerFormatError(StoreError, ValueError):
    """A stored document was written by a newer loopbot; the message names file and versions."""


def _iso(value: datetime) -> str:
    return value.isoformat()


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
        return {
            "format": RUN_FORMAT,
            "id": self.id,
            "loop": self.loop,
            "status": self.status,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "trigger": self.trigger,
            "review_id": self.review_id,
            "iterations": self.iterations,
            "reason": self.reason,
            "result": self.result,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        version = data.get("format")
        if not isinstance(version, int) or version > RUN_FORMAT:
            raise ValueError(
                f"run format {version!r} is not one this loopbot reads (up to {RUN_FORMAT}); upgrade loopbot"
            )
        return cls(
            id=data["id"],
            loop=data["loop"],
            status=data["status"],
            created_at=datetime.fromisoformat(data["created_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
            trigger=data["trigger"],
            review_id=data.get("review_id"),
            iterations=int(data.get("iterations", 0)),
            reason=data.get("reason"),
            result=data.get("result"),
        )


@dataclass
class Request:
    """Work handed to the running ``serve`` (e.g. kind "run", payload {"loop": "demo"})."""

    id: str
    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None


class Store(Protocol):
    """Durable state of one bot. Every write is atomic; documents carry a format version.

    ``update_*`` run ``mutate`` on the current document under a lock that
    serialises threads and processes, write the result atomically and only
    then return ``mutate``'s return value: an acknowledged change survives
    kill -9.
    """

    def put_run(self, run: RunRecord) -> None: ...

    def get_run(self, run_id: str) -> RunRecord: ...

    def list_runs(self) -> list[RunRecord]: ...

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], T]) -> T: ...

    def save_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None: ...

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None: ...

    def put_review(self, review: Review) -> None: ...

    def get_review(self, review_id: str) -> Review: ...

    def list_reviews(self) -> list[Review]: ...

    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T: ...

    def next_id(self, prefix: str) -> str: ...

    def enqueue_request(self, kind: str, payload: dict[str, Any]) -> str: ...

    def take_requests(self) -> list[Request]: ...

    def finish_request(self, request_id: str) -> None: ...
