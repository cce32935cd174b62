"""kill -9 in the middle of an outbox delivery: the message exists once, and the bot records it."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from bot.desk import ReviewDesk, local_channel
from bot.store import SqliteStore

from .ledger_channel import LedgerChannel
from .support import make_review

REPO = Path(__file__).resolve().parents[3]


def test_kill_9_after_the_post_and_before_its_record_leaves_one_message(tmp_path: Path) -> None:
    state, ledger = tmp_path / "state", tmp_path / "ledger.jsonl"
    store = SqliteStore(state)
    channel = LedgerChannel(ledger)
    desk = ReviewDesk(store, {"local": local_channel(state), "slack": channel}, clock=lambda: datetime.now(UTC))
    review = make_review()
    store.put_review(review)
    desk.open(review, [{"slack": {"channel": "C0AAA"}}])

    child = subprocess.Popen(
        [sys.executable, "-m", "tests.bot.desk.ledger_channel", str(state), str(ledger)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "posted"  # the message exists; the bot has not recorded it
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    assert [t.action for t in SqliteStore(state).pending_tasks() if t.channel == "slack"] == ["post"]

    restarted = SqliteStore(state)  # a new process's view: fresh indexes
    ReviewDesk(restarted, {"local": local_channel(state), "slack": channel}, clock=lambda: datetime.now(UTC)).flush()
    assert channel.messages() == [{"review": "demo-1", "target": "slack:C0AAA"}]
    assert restarted.pending_tasks() == []
    posts = {p["target"]: p["data"] for p in restarted.get_review("demo-1").posts}
    assert posts["slack:C0AAA"] == {"line": 0}
