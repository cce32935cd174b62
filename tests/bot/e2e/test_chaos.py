"""`loopbot serve` on a state dir with one corrupt document of each kind next to good ones (issue #12).

A truncated review (of a real waiting run), an empty run, a garbled
snapshot (of a real waiting run), a review in a newer format, a stray
``reviews/notes.json``, a corrupt id counter, a corrupt inbox request and a
corrupt outbox task. Every good review decided with ``loopbot decide`` is
applied (its run completes), the bad documents are named in ``status`` and
in /healthz's problems, and ``serve`` stays up throughout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import Workspace, demo_loop

pytestmark = pytest.mark.e2e

GOOD = ("demo-1", "demo-2", "demo-3")


def corrupt(state: Path) -> dict[str, str]:
    """Damage the state dir; {what: the file name status and /healthz must name}."""
    review5 = state / "reviews" / "demo-5.json"
    review5.write_bytes(review5.read_bytes()[:57])  # a real review, cut mid-write
    (state / "runs" / "demo-run-99.json").write_bytes(b"")
    (state / "snapshots" / "demo-run-4.json").write_bytes(b'{"format": 2, "run_id": "demo-run-4", "engine": {\x00\xff')
    newer = json.loads((state / "reviews" / "demo-1.json").read_text(encoding="utf-8"))
    newer.update(id="demo-98", format=999)
    (state / "reviews" / "demo-98.json").write_text(json.dumps(newer), encoding="utf-8")
    (state / "reviews" / "notes.json").write_text('{"todo": "ask bob about demo-2"}\n', encoding="utf-8")
    (state / "counters" / "demo-run.json").write_bytes(b"\x00\x00garbage")
    (state / "inbox").mkdir(exist_ok=True)
    (state / "inbox" / "request-50.json").write_bytes(b'{"format": 1, "kind": "run", "payl')
    (state / "outbox").mkdir(exist_ok=True)
    (state / "outbox" / "demo-1.post.bogus.json").write_bytes(b"[1, 2,")
    return {
        "truncated review": "demo-5.json",
        "empty run": "demo-run-99.json",
        "newer-format review": "demo-98.json",
        "stray review": "notes.json",
        "corrupt outbox task": "demo-1.post.bogus.json",
        "corrupt counter": "demo-run.json",
        "corrupt inbox request": "request-50.json",
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
    assert "snapshots/demo-run-4.json" in (failed["reason"] or ""), failed

    # a new run after the corrupt counter: handed to the server, it gets a fresh id
    handed = ws.cli("run", "demo")
    assert handed.returncode == 0 and "handed to the running server" in handed.stdout, handed.stderr
    ws.wait_open_review()
    status = ws.status()
    run_ids = [r["id"] for r in status["runs"]]
    assert len(run_ids) == len(set(run_ids)), run_ids
    assert "demo-run-100" in run_ids, run_ids  # counting resumes past every id in use, the quarantined 99 too

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
