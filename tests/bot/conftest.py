"""Fixtures shared across tests/bot: the log stream of setup_logging, and PostgreSQL (cluster, schema, stores)."""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.store.sql import PostgresStore

from .store import pg_cluster


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Where ``setup_logging(stream=...)`` writes; its handlers are taken off the root logger afterwards."""
    buffer = io.StringIO()
    yield buffer
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_loopbot", False)]:
        root.removeHandler(handler)


@pytest.fixture(scope="session", autouse=True)
def _config_memo_in_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`status` and `decide` remember config verdicts under $XDG_CACHE_HOME (bot.config_memo): not the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster_cleanup() -> Iterator[None]:
    """The throwaway cluster is stopped and removed when the session ends (harmless if none started)."""
    yield
    pg_cluster.stop()


@pytest.fixture
def schema(tmp_path: Path) -> str:
    return pg_cluster.schema_for(tmp_path)


@pytest.fixture
def url() -> str:
    return pg_cluster.url()


@pytest.fixture
def stores(url: str, schema: str) -> Iterator[Callable[..., PostgresStore]]:
    """Opens a PostgresStore (one per replica, named by ``owner``) on the test's schema; all closed at the end."""
    opened: list[PostgresStore] = []

    def open_one(owner: str, *, on_schema: str | None = None) -> PostgresStore:
        store = PostgresStore(url, schema=on_schema or schema, owner=owner)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()
