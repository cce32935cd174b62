"""One ``loopbot serve`` on SQLite while ``loopbot decide`` runs in other processes: 200 at once lose none.

Every decide opens loopbot.db for itself (its own writer connection) and
writes while serve writes too - applying outcomes, posting, saving
snapshots; BEGIN IMMEDIATE serialises them. Each of the 200 votes is stored
exactly once, every review is applied exactly once (concurrent_decides.py,
the same check PostgreSQL's replicas pass in test_replicas.py).
"""

from __future__ import annotations

import pytest

from bot.store import SqliteStore

from .concurrent_decides import loop, two_hundred_decides_lose_none_and_double_none
from .conftest import Workspace

pytestmark = pytest.mark.e2e


def test_two_hundred_concurrent_decides_while_serve_writes_lose_none_and_double_none(ws: Workspace) -> None:
    ws.write_config([loop()])
    ws.serve()
    two_hundred_decides_lose_none_and_double_none(SqliteStore(ws.state_dir), [ws], timeout=60)
