"""Shared pieces for the runner/service/server/CLI tests: a config on disk, a recording channel, a clock."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC
from pathlib import Path
from typing import Any

import yaml

from collections.abc import Mapping

from adapters.channel import Answer, MessageRef, ReviewPost, Target
from bot.config import BotConfig, load_config
from bot.desk import ReviewDesk
from bot.runner import Runner
from bot.store import SqliteStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def db_execute(state_dir: Path, statement: str, params: tuple[Any, ...] = ()) -> int:
    """Run one SQL statement on ``state_dir/loopbot.db`` behind the store's back (damage, loss); rows changed."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(Path(state_dir) / "loopbot.db")) as conn, conn:
        return conn.execute(statement, params).rowcount


def state_fingerprint(state_dir: Path, skip: Callable[[str], bool] = lambda _name: False) -> dict[str, str]:
    """Everything kept under ``state_dir``: each file's hash, the database as every record it holds.

    The database file itself changes without its content changing (WAL frames, checkpoints), so what is
    compared for it is its export (``sql_transfer.dump``); opening it reads and writes nothing.
    """
    import hashlib
    import json

    from bot.store.sql_transfer import dump

    result = {}
    for path in sorted(state_dir.rglob("*")):
        name = str(path.relative_to(state_dir))
        if path.is_file() and not path.name.startswith("loopbot.db") and path.name != ".healthz" and not skip(name):
            result[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    if (state_dir / "loopbot.db").is_file():
        store = SqliteStore(state_dir)
        try:
            result["loopbot.db"] = json.dumps(dump(store), sort_keys=True)
        finally:
            store.close()
    return result


def wait_for(condition: Callable[[], Any], *, timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` at the deadline.

    Between polls it sleeps as long as the last poll took (0.05 to 0.25 s): a condition that starts a process
    (``loopbot status``) then leaves the cores to the server it waits on, and a state that lasts a second is
    still seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        polled = time.monotonic()
        value = condition()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(min(max(0.05, now - polled), 0.25))


class FakeClock:
    """A settable ``now`` for deadline tests."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class RecordingChannel:
    """A ``Channel`` that records every call; tests assert on the records."""

    name: str = "local"
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        self.calls.append(("post", post.review_id, post.request.checkpoint_id))
        self.targets.append(target.key)
        return MessageRef(self.name, {"review_id": post.review_id, "at": target.key})

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        self.calls.append(("update", post.review_id, text))

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        self.calls.append(("escalate", post.review_id, text))
        return MessageRef(self.name, {"review_id": post.review_id, "escalation": True})

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        self.calls.append(("answer", answer.review_id or "", answer.text))

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.calls]


def write_config(root: Path, loops: list[dict[str, Any]], **top: Any) -> Path:
    path = root / "config.yaml"
    data = {"state_dir": str(root / "state"), "server": {"port": 0}, "loops": loops, **top}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def demo(name: str = "demo", **extra: Any) -> dict[str, Any]:
    loop: dict[str, Any] = {"name": name, "pattern": "demo", "review": {"reviewers": {"local": ["alice", "bob"]}}}
    review = extra.pop("review", {})
    loop["review"].update(review)
    loop.update(extra)
    return loop


@dataclass
class Bench:
    """A configured runner on a temp state dir, with its store, channel and clock."""

    config: BotConfig
    store: SqliteStore
    channel: RecordingChannel
    clock: FakeClock
    runner: Runner


def bench(root: Path, loops: list[dict[str, Any]], store: SqliteStore | None = None, **top: Any) -> Bench:
    config = load_config(write_config(root, loops, **top), environ={})
    store = store or SqliteStore(config.state_dir)
    channel = RecordingChannel()
    clock = FakeClock()
    desk = ReviewDesk(store, {"local": channel}, clock=clock, inline=True)
    runner = Runner(config, store, desk, clock=clock)
    return Bench(config, store, channel, clock, runner)
