"""Durable state of the bot behind one small ``Store`` contract (see ``base``)."""

from __future__ import annotations

from .base import (
    RUN_STATUSES,
    CorruptDocumentError,
    NewerFormatError,
    Request,
    RunRecord,
    Store,
    StoreError,
    UnknownReviewError,
    UnknownRunError,
)
from .files import FileStore
from .lock import AlreadyRunningError, ServeLock

__all__ = [
    "RUN_STATUSES",
    "AlreadyRunningError",
    "CorruptDocumentError",
    "FileStore",
    "NewerFormatError",
    "Request",
    "RunRecord",
    "ServeLock",
    "Store",
    "StoreError",
    "UnknownReviewError",
    "UnknownRunError",
]
