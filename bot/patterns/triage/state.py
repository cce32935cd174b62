"""What triage remembers between runs: per issue, the ``updated_at`` it last judged (and whether stale).

One JSON file per repository, ``state_dir/triage/<owner>__<name>/seen.json``,
written atomically. An issue whose ``updated_at`` is unchanged (and that has
not gone stale since) is not proposed again - also after a rejected or
modified proposal: a person has seen it; a change to the issue brings it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text

__all__ = ["load_seen", "save_seen"]

_FILE = "seen.json"


def load_seen(folder: Path) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads((folder / _FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise ValueError(f"triage: cannot read {folder / _FILE}: {err}; move it aside to start afresh") from err
    items = data.get("items") if isinstance(data, dict) else None
    return items if isinstance(items, dict) else {}


def save_seen(folder: Path, updates: dict[str, dict[str, Any]]) -> None:
    """Merge ``updates`` into the file (issues not seen this run keep their entries)."""
    folder.mkdir(parents=True, exist_ok=True)
    items = load_seen(folder)
    items.update(updates)
    atomic_write_text(folder / _FILE, json.dumps({"version": 1, "items": items}, sort_keys=True) + "\n")
