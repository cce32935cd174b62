"""`loopbot serve` on a database with one damaged row of each kind next to good ones (issue #12).

A truncated review (of a real waiting run), an empty run, a garbled
snapshot (of a real waiting run), a review in a newer format, a corrupt
inbox request and a corrupt outbox task, written into loopbot.db behind the
store's back. Every good review decided with ``loopbot decide`` is applied
(its run completes), the bad rows are named in ``status`` and in /healthz's
problems, and ``serve`` stays up throughout.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from .conftest import Workspace, demo_loop

pytestmark = pytest.mark.e2e

GOOD = ("demo-1", "demo-2", "demo-3")


def corrupt(state: Path) -> dict[str, str]:
    """Damage the database; {what: the row status and /healthz must name}."""
    with sqlite3.connect(state / "loopbot.db") as conn:
        conn.execute("UPDATE reviews SET doc = substr(doc, 1, 57) WHERE key = 'demo-5'")  # a real review, cut short
        conn.execute("INSERT INTO runs SELECT 'demo-run-99', 'demo-run-99', loop, status, trigger, created_at, 99,"
                     " archived, '' FROM runs WHERE key = 'demo-run-1'")
        conn.execute("UPDATE snapshots SET data = ? WHERE run_key = 'demo-run-4'",
                     (b'{"format": 2, "run_id": "demo-run-4", "engine": {\x00\xff',))
        newer = json.loads(conn.execute("SELECT doc FROM reviews WHERE key = 'demo-1'").fetchone()[0])
        newer.update(id="demo-98", format=999)
        conn.execute("INSERT INTO reviews SELECT 'demo-98', 'demo-98', run_key, checkpoint_id, status, created_at, 98,"
                     " deadline, archived, ?, NULL, NULL FROM reviews WHERE key = 'demo-1'", (json.dumps(newer),))
        conn.execute("INSERT INTO inbox VALUES ('request-50', 50, 'run', '{\"payl', '2026-01-01T00:00:00.000000+00:00',"
                     " NULL, NULL)")
        conn.execute("INSERT INTO outbox (id, channel, review_id, created_at, ready_at, doc) VALUES"
                     " ('demo-1.post.bogus', 'slack', 'demo-1', '2026-01-01T00:00:00.000000+00:00',"
                     " '2026-01-01T00:00:00.000000+00:00', '[1, 2,')")
    return {
        "truncated review": "reviews/demo-5",
        "empty run": "runs/demo-run-99",
        "newer-format review": "reviews/demo-98",
        "corrupt outbox task": "outbox/demo-1.post.bogus",
        "corrupt inbox request": "inbox/request-50",
    }


def test_serve_applies_every_good_decision_and_names_every_bad_document(ws: Workspace) -> None:
    ws.write_config([demo_loop(overlap="allow")])
    for n in range(1, 6):
        done = ws.cli("run", "demo")
        assert done.returncode == 0 and f"demo-run-{n}: waiting" in done.stdout, done.stdout + done.stderr
    bad = corrupt(ws.state_dir)

    bot = ws.serve()
    for review in GOOD:
        done = ws.cli("decide", review, "approve")
        assert done.returncode == 0, done.stderr
    for n in (1, 2, 3):
        ws.wait_run(f"demo-run-{n}", "completed")

    # the garbled snapshot: its decided review fails the run once, naming the file (status shows the reason;
    # /healthz does not list snapshots: a snapshot is read only when its run resumes)
    assert ws.cli("decide", "demo-4", "approve").returncode == 0
    failed = ws.wait_run("demo-run-4", "failed")
    assert "loopbot.db snapshots/demo-run-4" in (failed["reason"] or ""), failed

    # a new run: handed to the server, it gets a fresh id
    handed = ws.cli("run", "demo")
    assert handed.returncode == 0 and "handed to the running server" in handed.stdout, handed.stderr
    ws.wait_open_review()
    status = ws.status()
    run_ids = [r["id"] for r in status["runs"]]
    assert len(run_ids) == len(set(run_ids)), run_ids

    assert bot.proc is not None and bot.proc.poll() is None, bot.log()
    health = bot.healthz()
    assert health.status_code == 200, health.text
    problems = "\n".join(health.json().get("problems", []))
    text = ws.cli("status")
    assert text.returncode == 0, text.stderr
    missing = {what: name for what, name in bad.items() if name not in problems or name not in text.stdout}
    assert not missing, f"not named in /healthz problems and status: {missing}\n{problems}\n---\n{text.stdout}"
    assert "Traceback" not in text.stderr
    assert bot.proc.poll() is None, bot.log()
    assert bot.terminate() == 0
