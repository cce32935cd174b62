"""The directory store's reader reads what that store's own readers read, and nothing they passed over."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.store import legacy

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_state" / "state"


def test_a_hot_leftover_beside_its_archived_copy_is_never_read(tmp_path: Path) -> None:
    root = tmp_path / "state"
    shutil.copytree(FIXTURE, root)
    # a crash while archiving left a torn hot copy behind: the archived one is the record
    (root / "reviews" / "demo-2.json").write_text('{"format": 1, "id": "demo-2", "sta')
    (root / "runs" / "demo-run-2.json").write_text("")
    dump = legacy.read(root)
    assert [r["status"] for r in dump["reviews"] if r["id"] == "demo-2"] == ["applied"]
    assert [r["status"] for r in dump["runs"] if r["id"] == "demo-run-2"] == ["completed"]
    clean = legacy.read(FIXTURE)
    for kind in ("runs", "reviews"):
        assert sorted(dump[kind], key=lambda r: r["id"]) == sorted(clean[kind], key=lambda r: r["id"])
