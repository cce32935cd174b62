"""Durable state of the bot behind one small ``Store`` contract (see ``base``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import (
    ACTIVE_RUN_STATUSES,
    HOT_REVIEW_STATUSES,
    RUN_STATUSES,
    CorruptDocumentError,
    NewerFormatError,
    OutboxTask,
    Request,
    RunRecord,
    Store,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
    UnknownTaskError,
)
from .files import FileStore
from .lock import AlreadyRunningError, ServeLock
from .open import open_store
from .sql import SqliteStore

if TYPE_CHECKING:  # pragma: no cover
    from .sql import PostgresStore


def __getattr__(name: str) -> object:
    """``PostgresStore`` loads (with psycopg) only when asked for."""
    if name == "PostgresStore":
        from .sql import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACTIVE_RUN_STATUSES",
    "HOT_REVIEW_STATUSES",
    "RUN_STATUSES",
    "AlreadyRunningError",
    "CorruptDocumentError",
    "FileStore",
    "NewerFormatError",
    "OutboxTask",
    "PostgresStore",
    "Request",
    "RunRecord",
    "ServeLock",
    "SqliteStore",
    "Store",
    "StoreError",
    "UnknownReviewError",
    "UnknownRunError",
    "UnknownTaskError",
    "open_store",
]
