"""Slack as a real ``loopbot serve`` meets it: the fake Web API, a config block, signed requests.

``SlackDesk`` writes a workspace config whose ``slack:`` block points at a
``FakeSlackApi``, starts the bot, and sends slash commands, button clicks,
modal submissions and @-mentions to ``POST /slack/events`` - each signed with
the v0 scheme over the raw body (``signed_headers``), the way Slack does. It
also reads back what the bot did in Slack: the run's parent message, the
review message in its thread, updates and answers.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from adapters.slack.channel import EVENT_REVIEW, EVENT_RUN, EVENT_UPDATE
from tests.fakes.slack_api import FakeSlackApi, signed_headers

from .conftest import Bot, Workspace, demo_loop, wait_for

__all__ = ["CHANNEL", "SECRET", "SlackDesk", "desk", "fake", "slack_loop"]

SECRET = "e2e-signing-secret"
CHANNEL = "C0AAA"
BOT_TOKEN = "xoxb-test"
APP_TOKEN = "xapp-1-test"

_ids = itertools.count(1)


def slack_loop(approvals: int = 1, users: tuple[str, ...] = ("U0AAA", "U0BBB")) -> dict[str, Any]:
    """The demo loop, run on start, reviewed in ``#C0AAA`` by ``users``."""
    return demo_loop(run_on_start=True, review={
        "post_to": [{"slack": {"channel": CHANNEL}}],
        "reviewers": {"slack_users": list(users)},
        "approvals_required": approvals,
    })


def _metadata(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    metadata = message.get("metadata") or {}
    return str(metadata.get("event_type") or ""), dict(metadata.get("event_payload") or {})


class SlackDesk:
    """One workspace, one fake Slack, one ``loopbot serve`` answering Slack."""

    def __init__(self, ws: Workspace, fake: FakeSlackApi) -> None:
        self.ws = ws
        self.fake = fake
        for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
            ws.env.pop(name, None)  # Bolt reads them; only the config counts here
        self.bot: Bot | None = None
        self.http = httpx.Client(timeout=10)

    # --- set-up --------------------------------------------------------------------
    def configure(self, loop: dict[str, Any], *, socket_mode: bool = False) -> None:
        block: dict[str, Any] = {"bot_token": BOT_TOKEN, "api_base_url": self.fake.base_url}
        if socket_mode:
            block["app_token"] = APP_TOKEN
        else:
            block["signing_secret"] = SECRET
        self.ws.write_config([loop], slack=block)

    def serve(self) -> Bot:
        self.bot = self.ws.serve()
        return self.bot

    def open(self, loop: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Serve ``loop``; (its open review as status shows it, the review's Slack message)."""
        self.configure(loop)
        self.serve()
        review = self.ws.wait_open_review()
        return review, self.posted_review(review["id"])

    @property
    def url(self) -> str:
        assert self.bot is not None
        return f"http://127.0.0.1:{self.bot.port}/slack/events"

    # --- what the bot did in Slack -----------------------------------------------------
    def tagged(self, event_type: str, **payload: str) -> list[dict[str, Any]]:
        found = []
        for message in self.fake.channel_messages(CHANNEL):
            kind, fields = _metadata(message)
            if kind == event_type and all(fields.get(k) == v for k, v in payload.items()):
                found.append(message)
        return found

    def posted_review(self, review_id: str, timeout: float = 15.0) -> dict[str, Any]:
        """The review's message in its run's thread, once the outbox delivered it."""
        return wait_for(lambda: next(iter(self.tagged(EVENT_REVIEW, review_id=review_id)), None), timeout=timeout,
                        what=f"review {review_id} posted in Slack")

    def parent(self, run_id: str) -> dict[str, Any]:
        (parent,) = self.tagged(EVENT_RUN, run_id=run_id)
        return parent

    def updates(self, review_id: str) -> list[str]:
        """The texts of the thread replies the bot made for ``review_id`` (outcome, run's end, reminders)."""
        return [str(m.get("text", "")) for m in self.tagged(EVENT_UPDATE, review_id=review_id)]

    def ephemerals(self, user: str) -> list[str]:
        return [str(c.params.get("text", "")) for c in self.fake.calls_to("chat.postEphemeral")
                if c.params.get("user") == user]

    def votes(self, review_id: str) -> list[dict[str, Any]]:
        review = self.ws.review(review_id)
        assert review is not None
        return list(review["votes"])

    # --- requests as Slack sends them ---------------------------------------------------
    def send(self, body: str, *, json_body: bool = False, secret: str = SECRET, timestamp: int | None = None,
             **headers: str) -> httpx.Response:
        return self.http.post(self.url, content=body.encode(),
                              headers=signed_headers(secret, body, timestamp=timestamp, json_body=json_body,
                                                     **headers))

    @staticmethod
    def slash_fields(text: str, user: str = "U0AAA", *, channel: str = CHANNEL) -> dict[str, str]:
        """A slash command's fields, as Slack POSTs them (form) or sends them over Socket Mode."""
        return {
            "token": "deprecated", "team_id": "T0TEAM", "team_domain": "test", "channel_id": channel,
            "channel_name": "ops", "user_id": user, "user_name": user.lower(), "command": "/loopbot", "text": text,
            "response_url": "https://hooks.slack.test/commands/1", "api_app_id": "A0APP",
            "trigger_id": f"{next(_ids)}.{time.time_ns()}.e2e",
        }

    def slash_body(self, text: str, user: str = "U0AAA") -> str:
        return urlencode(self.slash_fields(text, user))

    def slash(self, text: str, user: str = "U0AAA") -> httpx.Response:
        return self.send(self.slash_body(text, user))

    @staticmethod
    def click_payload(action_id: str, message: dict[str, Any], review_id: str, user: str = "U0AAA",
                      action_ts: str | None = None) -> dict[str, Any]:
        return {
            "type": "block_actions", "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
            "team": {"id": "T0TEAM"}, "api_app_id": "A0APP", "trigger_id": f"{next(_ids)}.{time.time_ns()}.click",
            "response_url": "https://hooks.slack.test/actions/1",
            "container": {"type": "message", "message_ts": message["ts"], "channel_id": CHANNEL,
                          "is_ephemeral": False},
            "channel": {"id": CHANNEL, "name": "ops"},
            "message": {"ts": message["ts"], "thread_ts": message.get("thread_ts", ""),
                        "text": message.get("text", ""), "blocks": message.get("blocks", [])},
            "actions": [{"type": "button", "action_id": action_id, "block_id": f"loopbot_review:{review_id}",
                         "value": review_id, "text": {"type": "plain_text", "text": action_id},
                         "action_ts": action_ts or f"{time.time():.6f}"}],
        }

    @staticmethod
    def interactive(payload: dict[str, Any]) -> str:
        return "payload=" + quote(json.dumps(payload))

    def click(self, action_id: str, message: dict[str, Any], review_id: str, user: str = "U0AAA",
              action_ts: str | None = None) -> httpx.Response:
        return self.send(self.interactive(self.click_payload(action_id, message, review_id, user, action_ts)))

    @staticmethod
    def submission_payload(view: dict[str, Any], reason: str, user: str = "U0AAA") -> dict[str, Any]:
        """What Slack POSTs when ``view`` (as views.open got it) is submitted with ``reason`` typed in."""
        return {
            "type": "view_submission", "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
            "team": {"id": "T0TEAM"}, "api_app_id": "A0APP", "trigger_id": f"{next(_ids)}.{time.time_ns()}.view",
            "view": {"id": f"V{next(_ids):07d}", "type": "modal", "callback_id": view["callback_id"],
                     "private_metadata": view["private_metadata"],
                     "state": {"values": {"reason": {"value": {"type": "plain_text_input", "value": reason}}}}},
        }

    @staticmethod
    def mention_body(text: str, thread_ts: str, user: str = "U0AAA", event_id: str | None = None) -> str:
        ts = f"{time.time():.6f}"
        event = {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": CHANNEL, "event_ts": ts,
                 "thread_ts": thread_ts}
        return json.dumps({"token": "x", "team_id": "T0TEAM", "api_app_id": "A0APP", "type": "event_callback",
                           "event_id": event_id or f"Ev{next(_ids):08d}", "event_time": int(time.time()),
                           "event": event})

    def mention(self, text: str, thread_ts: str, user: str = "U0AAA", event_id: str | None = None,
                **headers: str) -> httpx.Response:
        return self.send(self.mention_body(text, thread_ts, user, event_id), json_body=True, **headers)

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def fake() -> Iterator[FakeSlackApi]:
    """A fake Slack Web API; a test file that needs user groups defines its own ``fake`` instead."""
    with FakeSlackApi() as api:
        yield api


@pytest.fixture
def desk(ws: Workspace, fake: FakeSlackApi) -> Iterator[SlackDesk]:
    """A SlackDesk on the test's workspace and the ``fake`` Slack its test file imports or defines; closed after."""
    slack = SlackDesk(ws, fake)
    try:
        yield slack
    finally:
        slack.close()
