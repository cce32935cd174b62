"""``open_store(config)``: the store the config names - PostgreSQL with a ``store:`` block, else the directory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .base import Store

__all__ = ["open_store", "store_url"]


def store_url(config: Any) -> str | None:
    """The PostgreSQL URL of ``config``'s ``store:`` block, None for the directory store."""
    block = getattr(config, "store", None)
    return None if block is None else str(block.url.get_secret_value())


def open_store(config: Any, *, migrate: bool = True) -> Store:
    """A ``PostgresStore`` (migrated to this loopbot's schema unless ``migrate=False``) or a ``FileStore``.

    psycopg is imported only when a ``store:`` block asks for PostgreSQL.
    """
    url = store_url(config)
    if url is None:
        from .files import FileStore

        return FileStore(config.state_dir)
    from .sql import PostgresStore

    return PostgresStore(url, schema=config.store.schema_name, migrate=migrate,
                         lease=float(getattr(config.store, "lease_seconds", 60.0)))
