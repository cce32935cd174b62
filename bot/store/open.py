"""``open_store(config)``: the store the config names - PostgreSQL with a ``store:`` block, else SQLite in state_dir."""

from __future__ import annotations

from typing import Any

from . import legacy
from .base import Store, StoreError
from .sql import PostgresStore, SqliteStore

__all__ = ["open_store", "store_url"]


def store_url(config: Any) -> str | None:
    """The PostgreSQL URL of ``config``'s ``store:`` block, None for the embedded SQLite store."""
    block = getattr(config, "store", None)
    return None if block is None else str(block.url.get_secret_value())


def open_store(config: Any, *, migrate: bool = True, upgrading: bool = False) -> Store:
    """A ``PostgresStore`` or a ``SqliteStore`` (``state_dir/loopbot.db``), migrated unless ``migrate=False``.

    A state_dir still holding an older loopbot's directory store is refused
    unless ``upgrading`` (``serve`` and ``loopbot migrate`` import it), so no
    command answers from an empty database beside it.
    """
    url = store_url(config)
    if url is None:
        if not upgrading and legacy.found(config.state_dir):
            raise StoreError(f"{config.state_dir} holds the directory store of an older loopbot; "
                             "`loopbot migrate` (or `loopbot serve`) imports it into loopbot.db once")
        return SqliteStore(config.state_dir, migrate=migrate)
    return PostgresStore(url, schema=config.store.schema_name, migrate=migrate,
                         lease=float(getattr(config.store, "lease_seconds", 60.0)))
