"""The throwaway PostgreSQL cluster of the store tests is stopped and removed when the session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import pg_cluster


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster_cleanup() -> Iterator[None]:
    yield
    pg_cluster.stop()
