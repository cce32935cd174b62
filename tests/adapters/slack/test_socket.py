"""Socket Mode: the same app over a (fake) Slack WebSocket, run from a thread of its own."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from urllib.parse import unquote

import pytest

from adapters.commands import Command
from adapters.slack.listeners import build_app
from adapters.vote_batches import one_by_one
from adapters.slack.socket import SocketModeError, SocketModeRunner
from loop_engine.checkpoint import HumanDecision
from tests.adapters.slack.test_listeners import SECRET, Recorder, click
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlackApi, FakeSocketMode


@pytest.fixture
def socket_mode(slack: FakeSlackApi) -> Iterator[FakeSocketMode]:
    fake = FakeSocketMode().start()
    slack.socket_url = fake.url
    yield fake
    fake.stop()


def test_a_slash_command_envelope_reaches_the_handler_and_is_acked(
    slack: FakeSlackApi, socket_mode: FakeSocketMode
) -> None:
    recorder = Recorder()
    app = build_app(signing_secret=SECRET, handler=one_by_one(recorder), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    runner = SocketModeRunner(app, APP_TOKEN)
    runner.start(timeout=10)
    try:
        assert socket_mode.connected.wait(5)
        (opened,) = slack.calls_to("apps.connections.open")
        assert opened.token == APP_TOKEN
        ack = socket_mode.send("slash_commands", {
            "token": "x", "team_id": "T0TEAM", "channel_id": "C0REVIEW", "user_id": "U0AAA", "user_name": "alice",
            "command": "/loopbot", "text": "approve triage-17", "response_url": slack.response_url,
            "trigger_id": "1.2.3", "api_app_id": "A0APP",
        })
        assert ack["payload"] == {"text": "Counted &lt;triage-17&gt;: 1 of 2 approvals", "response_type": "ephemeral"}
        (reply,) = recorder.replies
        assert reply.command == Command(HumanDecision.APPROVE, "triage-17") and reply.voter.id == "U0AAA"
        clicked = socket_mode.send("interactive", json.loads(unquote(click("loopbot_pause").removeprefix("payload="))))
        assert "payload" not in clicked or not clicked["payload"]
        deadline = time.monotonic() + 5
        while len(recorder.replies) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert recorder.replies[1].via == "button" and recorder.replies[1].review_id == "triage-17"
    finally:
        runner.stop()
    assert not runner.running
    deadline = time.monotonic() + 5
    while socket_mode.connected.is_set() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not socket_mode.connected.is_set(), "stop() closed the WebSocket"


def test_a_bad_app_token_fails_start(slack: FakeSlackApi) -> None:
    app = build_app(signing_secret=SECRET, handler=one_by_one(Recorder()), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    runner = SocketModeRunner(app, APP_TOKEN)
    with pytest.raises(SocketModeError, match="socket_mode_not_enabled"):
        runner.start(timeout=10)
    assert not runner.running
    with pytest.raises(ValueError, match="xapp-"):
        SocketModeRunner(app, BOT_TOKEN)
