"""serve()'s start: what it takes (the lock, as a server) and what it warns about before serving."""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.config import load_config
import bot.http_server as http_server
import bot.server as server_module
from bot.http_server import HttpServer
from bot.server import serve
from bot.service import Service
from bot.serve_lock import ServeLock

from .runtime_support import demo, write_config

SLACK = {"bot_token": "xoxb-not-used", "signing_secret": "not-used-either"}
GITHUB = {"token": "ghp-not-used"}


def serve_once(config_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """Run serve()'s whole start and stop; instead of serving, look at who holds the lock."""
    config = load_config(config_path, environ={})
    seen: list[dict[str, Any] | None] = []
    settled: list[bool] = []
    monkeypatch.setattr(server_module, "settle_collector", lambda: settled.append(True))  # not this process's
    monkeypatch.setattr(server_module, "favour_the_event_loop", lambda: None)  # nor this
    monkeypatch.setattr(HttpServer, "run", lambda self: seen.append(ServeLock.holder(config.state_dir)
                                                                     if settled else {"role": "collector not settled"}))
    assert serve(config) == 0
    return seen[0]


def test_serve_holds_the_lock_as_a_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    holder = serve_once(write_config(tmp_path, [demo()]), monkeypatch)
    assert holder is not None and holder["role"] == "serve" and holder["port"]
    assert ServeLock.holder(tmp_path / "state") is None  # released at the stop


def test_serve_names_each_configured_channel_and_warns_about_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    serve_once(write_config(tmp_path, [demo()], slack=SLACK, github=GITHUB), monkeypatch)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []
    assert "channels: local, slack (POST /slack/events), github (posting only" in caplog.text


def test_serve_without_slack_or_github_warns_about_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    serve_once(write_config(tmp_path, [demo()]), monkeypatch)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_serve_lets_healthz_watch_the_tick_it_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wired: dict[str, Any] = {}
    real = server_module.create_app
    monkeypatch.setattr(server_module, "create_app", lambda *a, **kw: (wired.update(kw), real(*a, **kw))[1])
    serve_once(write_config(tmp_path, [demo()]), monkeypatch)
    assert isinstance(wired.get("service"), Service)


def test_at_restart_the_waiting_reviews_are_named_with_the_line_that_answers_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 13 item 7: the decide lines printed before the restart scrolled away; one line says them again."""
    from bot.cli import main

    monkeypatch.setenv("LOOPBOT_USER", "alice")
    config = write_config(tmp_path, [demo(), demo("nightly", review={"reviewers": {"local": ["carol"]}})])
    assert main(["run", "demo", "--config", str(config)]) == 0
    assert main(["run", "nightly", "--config", str(config)]) == 0
    caplog.set_level(logging.INFO, logger="bot.server")
    serve_once(config, monkeypatch)
    [line] = [r.getMessage() for r in caplog.records if "wait for a decision" in r.getMessage()]
    assert line.startswith("2 review(s) wait for a decision: demo-1, nightly-1; answer with `")
    assert "decide demo-1 approve --as NAME` (NAME: one of the local reviewers alice, bob)" in line


def test_settle_collector_freezes_what_start_up_loaded_and_collects_the_young_less_often() -> None:
    before = gc.get_threshold()
    try:
        http_server.settle_collector()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (http_server.YOUNG_COLLECTION_EVERY, *before[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_the_event_loop_waits_at_most_the_short_switch_interval_for_the_interpreter() -> None:
    before = sys.getswitchinterval()
    try:
        http_server.favour_the_event_loop()
        assert sys.getswitchinterval() == pytest.approx(http_server.SWITCH_INTERVAL) and before > 0.001
    finally:
        sys.setswitchinterval(before)


def test_reviews_nobody_may_answer_locally_get_no_decide_line_from_run_or_at_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #18: a decide line the vote path would refuse is never printed; where to answer is, instead."""
    from bot.cli import main

    monkeypatch.setenv("LOOPBOT_USER", "alice")
    config = write_config(tmp_path, [demo(review={"reviewers": {"slack_users": ["U0AAA"]}})])
    assert main(["run", "demo", "--config", str(config)]) == 0
    printed = capsys.readouterr().out
    assert "decide demo-1" not in printed and "Nobody may answer locally" in printed
    caplog.set_level(logging.INFO, logger="bot.server")
    serve_once(config, monkeypatch)
    [line] = [r.getMessage() for r in caplog.records if "wait for a decision" in r.getMessage()]
    assert line.startswith("1 review(s) wait for a decision: demo-1; Nobody may answer locally")
    assert "decide" not in line
