"""Clear refusals with non-zero exits and an untouched store; one server per state dir; SIGTERM."""

from __future__ import annotations

import shutil
import time

import httpx
import pytest

from .conftest import Workspace, demo_loop, wait_for

pytestmark = pytest.mark.e2e


def test_bad_config_is_named_by_check_and_serve(ws: Workspace) -> None:
    ws.write_config([demo_loop(schedule={"cron": "61 * * * *"})])
    check = ws.cli("check")
    assert check.returncode == 1
    assert "loops[0].schedule" in check.stderr
    serve = ws.cli("serve")
    assert serve.returncode != 0 and "loops[0].schedule" in serve.stderr
    assert not ws.state_dir.exists()


def test_a_bad_config_changes_nothing_in_an_existing_state_dir(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    assert ws.cli("run", "demo").returncode == 0  # a waiting run and an open review
    before = ws.fingerprint()
    ws.write_config([demo_loop(review={"approvals_required": 0})])
    for command in (["check"], ["serve"], ["run", "demo"], ["decide", "demo-1", "approve"], ["status"]):
        done = ws.cli(*command)
        assert done.returncode == 1, command
        assert "loops[0].review.approvals_required" in done.stderr and str(ws.config_path) in done.stderr, command
    assert ws.fingerprint() == before


def test_check_accepts_a_good_config_without_printing_secrets(ws: Workspace) -> None:
    ws.write_config([demo_loop()], slack={"bot_token": "${SLACK_TOKEN}", "signing_secret": "s3cr3t-signing-value"})
    done = ws.cli("check", "--offline", env={"SLACK_TOKEN": "xoxb-123456789-secret-token"})
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout and "demo" in done.stdout
    assert "xoxb-123456789-secret-token" not in done.stdout + done.stderr
    assert "s3cr3t-signing-value" not in done.stdout + done.stderr


def test_unknown_review_and_bad_decision_word_change_nothing(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    assert ws.cli("run", "demo").returncode == 0
    before = ws.fingerprint()

    unknown = ws.cli("decide", "demo-7", "approve")
    assert unknown.returncode == 2 and "no review 'demo-7'" in unknown.stderr and "demo-1" in unknown.stderr
    word = ws.cli("decide", "demo-1", "aprove")
    assert word.returncode == 2 and 'did you mean "approve"' in word.stderr and "usage" in word.stderr
    loop = ws.cli("run", "dmeo")
    assert loop.returncode == 2 and 'did you mean "demo"' in loop.stderr
    assert ws.fingerprint() == before


def test_second_serve_names_the_holder(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    bot = ws.serve()
    second = ws.cli("serve")
    assert second.returncode == 3
    assert f"pid {bot.proc.pid}" in second.stderr


def test_sigterm_exits_zero_quickly_and_the_log_has_no_secrets(ws: Workspace) -> None:
    token = "xoxb-5555-6666-secretsecret"
    ws.env["SLACK_TOKEN"] = token
    slack = {"bot_token": "${SLACK_TOKEN}", "signing_secret": "sig-secret-77"}
    ws.write_config([demo_loop(run_on_start=True)], slack=slack)
    bot = ws.serve()
    ws.wait_open_review()
    started = time.monotonic()
    assert bot.terminate(timeout=10) == 0
    assert time.monotonic() - started < 10
    assert "loopbot stopped" in bot.log() and "channels: local, slack" in bot.log()
    assert token not in bot.log() and "sig-secret-77" not in bot.log()


def test_healthz_turns_503_when_the_state_dir_is_removed(ws: Workspace) -> None:
    ws.write_config([demo_loop()])
    bot = ws.serve()
    assert bot.healthz().json() == {
        "status": "ok", "runs": {}, "open_reviews": 0, "decided_reviews": 0, "outbox_pending": 0,
    }
    shutil.rmtree(ws.state_dir)
    # until serve notices at its next tick and exits (tests/bot/e2e/test_state_dir_lost.py), every probe says 503
    proc = bot.proc
    assert proc is not None

    def gone() -> bool:
        try:
            response = bot.healthz()
        except httpx.HTTPError:
            return proc.poll() is not None
        assert response.status_code == 503 and "missing" in response.json()["error"]
        return False

    wait_for(gone, timeout=15, what="serve to exit once its state dir was removed")
    assert proc.wait(timeout=10) == 1
