"""``open_store(config)``: the store the config names - PostgreSQL with a ``store:`` block, else SQLite in state_dir."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .base import Store

__all__ = ["open_store", "store_url"]


def store_url(config: Any) -> str | None:
    """The PostgreSQL URL of ``config``'s ``store:`` block, None for the embedded SQLite store."""
    block = getattr(config, "store", None)
    return None if block is None else str(block.url.get_secret_value())


def open_store(config: Any, *, migrate: bool = True, upgrading: bool = False) -> Store:
    """A ``PostgresStore`` or a ``SqliteStore`` (``state_dir/loopbot.db``), migrated to this loopbot's schema
    unless ``migrate=False``.

    A state_dir still holding an older loopbot's directory store is refused
    (``serve`` and ``loopbot migrate`` import it: ``upgrading``), so no
    command answers from an empty database beside it. psycopg is imported
    only when a ``store:`` block asks for PostgreSQL.
    """
    url = store_url(config)
    from .sql import PostgresStore, SqliteStore

    if url is None:
        from . import legacy
        from .base import StoreError

        if not upgrading and legacy.found(config.state_dir):
            raise StoreError(f"{config.state_dir} holds the directory store of an older loopbot; "
                             "`loopbot migrate` (or `loopbot serve`) imports it into loopbot.db once")
        return SqliteStore(config.state_dir, migrate=migrate)

    return PostgresStore(url, schema=config.store.schema_name, migrate=migrate,
                         lease=float(getattr(config.store, "lease_seconds", 60.0)))
