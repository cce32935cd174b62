"""Durable state of the bot behind a few small contracts that ``Store`` joins (see ``base``)."""

from __future__ import annotations

from .base import (
    CorruptDocumentError, NewerFormatError, OutboxTask, RunRecord, Store, StoreError, UnknownReviewError,
    UnknownRunError, UnknownTaskError,
)
from .open import open_store
from .sql import PostgresStore, SqliteStore  # psycopg itself loads only when a PostgresStore connects

__all__ = ["CorruptDocumentError", "NewerFormatError", "OutboxTask", "PostgresStore", "RunRecord", "SqliteStore",
           "Store", "StoreError", "UnknownReviewError", "UnknownRunError", "UnknownTaskError", "open_store"]
