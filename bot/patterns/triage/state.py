"""What triage remembers between runs: per issue, the ``updated_at`` it last judged (and whether stale).

One JSON file per repository, ``state_dir/triage/<owner>__<name>/seen.json``,
written atomically. An issue whose ``updated_at`` is unchanged (and that has
not gone stale since) is not proposed again - also after a rejected or
modified proposal: a person has seen it; a change to the issue brings it back.

loopbot's own label writes move ``updated_at`` too. After applying, the
report re-reads the issues it labelled and keeps their new ``updated_at``
(``after_own_writes``), with ``activity_at`` - when a person last acted -
unchanged: its write neither makes an issue "changed" nor resets its
staleness. An issue that someone else labelled or closed meanwhile is not
taken: it looks changed, and the next run judges it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text

from adapters.github.channel import RUN_LABEL

from .rules import Item

__all__ = ["after_own_writes", "load_seen", "ours_label", "save_seen", "seen_entry"]

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


def seen_entry(updated_at: str, item: Item, stale: bool) -> dict[str, Any]:
    """What ``seen.json`` keeps of an item: GitHub's ``updated_at``, and when a person last acted (``activity_at``)."""
    entry: dict[str, Any] = {"updated_at": updated_at, "stale": stale, "activity_at": item.updated_at}
    if item.reviewed:
        entry["reviewed"] = True
    return entry


def ours_label(label: str) -> bool:
    """loopbot's own labels (``loopbot``, ``loopbot:*``): written by loopbot, never "someone else"."""
    return label == RUN_LABEL or label.startswith(RUN_LABEL + ":")


def after_own_writes(written: dict[int, dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The seen entries of the issues loopbot labelled (``written``: number -> entry with its ``labels`` now).

    ``rows``: the issues changed since the proposal, as GitHub lists them.
    An issue is taken when it is open and carries no label but those it had
    and loopbot's own.
    """
    updates = {}
    for row in rows:
        entry = written.get(int(row.get("number", 0)))
        if entry is None or row.get("state", "open") != "open":
            continue
        labels = {str(x.get("name")) for x in row.get("labels") or [] if isinstance(x, dict)}
        if {x for x in labels if not ours_label(x)} <= set(entry["labels"]):
            updates[str(row["number"])] = {**{k: v for k, v in entry.items() if k != "labels"},
                                           "updated_at": str(row.get("updated_at") or "")}
    return updates
