"""Issue 19's budget for ``bot/store``: at most 2,500 lines, and none of the directory store's machinery.

The store is a thin layer over real engines; a line count that creeps past
the budget is the first sign of a database of our own growing back.
"""

from __future__ import annotations

from pathlib import Path

STORE = Path(__file__).resolve().parents[3] / "bot" / "store"
#: The directory store's coherence, cache, journal and index modules (issue 19: "what goes").
GONE = ("files", "index", "watch", "recent", "journal", "vote_journal", "journaled", "collection", "intake")


def test_the_store_stays_within_its_line_budget() -> None:
    lines = {path.name: len(path.read_text("utf-8").splitlines()) for path in sorted(STORE.glob("*.py"))}
    assert sum(lines.values()) <= 2500, lines


def test_none_of_the_directory_stores_machinery_is_back() -> None:
    assert [name for name in GONE if (STORE / f"{name}.py").exists()] == []
