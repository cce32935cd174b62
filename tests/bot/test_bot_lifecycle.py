"""``Bot``: the serving process's parts started and stopped in-process, as often as asked, on one state dir."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bot.config import load_config
from bot.http_server import bind_socket
from bot.server import Bot
from bot.store import SqliteStore
from bot.serve_lock import AlreadyRunningError, ServeLock

from .runtime_support import demo, wait_for, write_config


def _waiting(port: int) -> dict[str, object] | None:
    """/healthz's body once it answers with the demo run's review open; None until then (or until uvicorn listens)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as answer:
            body: dict[str, object] = json.loads(answer.read())
            return body if body["open_reviews"] == 1 and body["runs"] == {"waiting": 1} else None
    except urllib.error.URLError:
        return None


def _one_life(bot: Bot) -> dict[str, object]:
    """Start ``bot``, serve from a thread until /healthz shows the demo's review, stop it; what /healthz said."""
    bot.start()
    http = threading.Thread(target=bot.serve_http, name="test-http")
    try:
        http.start()
        body = wait_for(lambda: _waiting(bot.port), what="/healthz of the started bot with the review open")
        holder = ServeLock.holder(bot.state_dir)
        assert holder is not None and holder["role"] == "serve" and holder["port"] == bot.port
        with pytest.raises(AlreadyRunningError):  # a second bot on the same state dir is refused ...
            Bot(bot.config).start()
        assert ServeLock.holder(bot.state_dir) == holder  # ... and leaves the first one's lock alone
    finally:
        bot.request_stop()
        http.join(10)
        bot.stop()
    assert not http.is_alive()
    return body


def test_a_bot_starts_and_stops_twice_on_one_state_dir_leaving_no_thread_and_the_lock_free(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, [demo(run_on_start=True)]), environ={})
    before = set(threading.enumerate())
    bot = Bot(config)

    first = _one_life(bot)
    assert ServeLock.holder(config.state_dir) is None
    wait_for(lambda: set(threading.enumerate()) <= before, timeout=5, what="the first life's threads to end")

    second = _one_life(bot)  # the same Bot again: the run the first life started is still there, waiting
    assert ServeLock.holder(config.state_dir) is None
    wait_for(lambda: set(threading.enumerate()) <= before, timeout=5, what="the second life's threads to end")

    # the run the first life started waits on in the second: none started twice
    assert (first["runs"], first["open_reviews"]) == (second["runs"], second["open_reviews"])
    store = SqliteStore(config.state_dir)
    try:
        assert [run.status for run in store.list_runs()] == ["waiting"]  # one run: the second start added none
    finally:
        store.close()


def test_a_bot_that_cannot_bind_its_port_releases_the_lock_and_starts_nothing(tmp_path: Path) -> None:
    taken = bind_socket("127.0.0.1", 0)
    taken.listen()
    try:
        port = taken.getsockname()[1]
        config = load_config(write_config(tmp_path, [demo(run_on_start=True)], server={"port": port}), environ={})
        before = set(threading.enumerate())
        with pytest.raises(OSError):
            Bot(config).start()
        assert ServeLock.holder(config.state_dir) is None
        assert set(threading.enumerate()) <= before
    finally:
        taken.close()


def test_a_stop_asked_before_the_bot_started_ends_its_serving_at_once(tmp_path: Path) -> None:
    """SIGTERM during start-up (serve's handlers are in place before ``start``): the bot stops instead of serving."""
    config = load_config(write_config(tmp_path, [demo()]), environ={})
    bot = Bot(config)
    bot.request_stop()
    bot.start()
    http = threading.Thread(target=bot.serve_http, name="test-http")
    try:
        http.start()
        http.join(10)
        assert not http.is_alive()
    finally:
        bot.request_stop()
        http.join(10)
        bot.stop()
    assert ServeLock.holder(config.state_dir) is None
