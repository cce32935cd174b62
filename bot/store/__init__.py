"""Durable state of the bot behind one small ``Store`` contract (see ``base``)."""

from __future__ import annotations

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

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "HOT_REVIEW_STATUSES",
    "RUN_STATUSES",
    "AlreadyRunningError",
    "CorruptDocumentError",
    "FileStore",
    "NewerFormatError",
    "OutboxTask",
    "Request",
    "RunRecord",
    "ServeLock",
    "Store",
    "StoreError",
    "UnknownReviewError",
    "UnknownRunError",
    "UnknownTaskError",
]
