"""Fixtures the store tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.store import collection, documents, files, index


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every document read (the store reads them through ``documents.read_bytes``/``read_stat``), by name."""
    seen: list[str] = []

    def counting(path: str | Path) -> bytes:
        seen.append(os.path.basename(path))
        return documents.read_bytes(path)

    def counting_stat(path: str | Path) -> tuple[os.stat_result, bytes]:
        seen.append(os.path.basename(path))
        return documents.read_stat(path)

    for module in (collection, files, index):
        monkeypatch.setattr(module, "read_bytes", counting)
    monkeypatch.setattr(index, "read_stat", counting_stat)
    return seen
