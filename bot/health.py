"""What ``GET /healthz`` answers: whether this bot can still take and apply decisions, and what it holds.

A platform restarts a bot whose probe fails, so every reason a bot that
still answers HTTP cannot do its work is a 503 here; a probe reads only
the store's index and writes nothing, so it costs the same at any size.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.desk import ReviewDesk, VotePath
from bot.service import Service
from bot.store.base import Store

__all__ = ["health"]


def _unwritable(state_dir: Path) -> str | None:
    """Why the store cannot write, checked without writing (the probe runs on every request).

    One ``statvfs``: a read-only mount, no block or no inode left for this
    process (root may use the blocks reserved for it). Its cost does not
    grow with the documents stored.
    """
    fs = os.statvfs(state_dir)
    if fs.f_flag & os.ST_RDONLY:
        return f"state_dir {state_dir} is on a read-only file system"
    if not os.access(state_dir, os.W_OK | os.X_OK):
        return f"state_dir {state_dir} is not writable by this process"
    root = os.geteuid() == 0
    if (fs.f_bfree if root else fs.f_bavail) == 0:
        return f"state_dir {state_dir} is on a full disk (no space left)"
    if fs.f_files and (fs.f_ffree if root else fs.f_favail) == 0:
        return f"state_dir {state_dir} is on a disk with no inodes left"
    return None


def health(
    store: Store, state_dir: Path, service: Service | None = None, desk: ReviewDesk | None = None,
    replicas: Callable[[], dict[str, Any]] | None = None, votes: VotePath | None = None,
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) for /healthz: counts when the store reads and writes, 503 otherwise.

    Also 503 when ``service``'s tick has stopped or stalled, or an outbox
    delivery thread died: such a bot still answers HTTP but applies no decision.
    The counts come from the store's index, so a probe costs the same with
    ten reviews or ten thousand, and it writes nothing. Quarantined documents
    are listed under ``problems`` (the rest is served). On a store shared by
    replicas, ``replicas()`` adds which one leads and each one's heartbeat.
    A store that cannot take writes is 503 too: read-only, a full disk, or
    the last vote ``votes`` failed to store (until a later one is stored).
    """
    problem = service.problem() if service is not None else None
    if problem is None and desk is not None:
        problem = desk.problem()
    if problem is None and votes is not None and (failed := votes.write_problem()) is not None:
        problem = f"store cannot take writes: {failed}"
    if problem is not None:
        return 503, {"status": "unavailable", "error": problem}
    if not state_dir.is_dir():
        return 503, {"status": "unavailable", "error": f"state_dir {state_dir} is missing"}
    try:
        unwritable = _unwritable(state_dir)
        if unwritable is not None:
            return 503, {"status": "unavailable", "error": f"store unusable: {unwritable}"}
        counts = store.counts()
        problems = store.problems()
        shared = replicas() if replicas is not None else None
    except (OSError, ValueError) as err:  # ValueError: a corrupt document, named in the message
        return 503, {"status": "unavailable", "error": f"store unusable: {err}"}
    body: dict[str, Any] = {
        "status": "ok",
        "runs": counts["runs"],
        "open_reviews": counts["open_reviews"],
        "decided_reviews": counts["decided_reviews"],
        "outbox_pending": counts["outbox_pending"],
    }
    if problems:
        body["problems"] = problems
    if shared is not None:
        body.update(shared)
    return 200, body
