"""A fake Slack: the Web API on a real local HTTP server, a Socket Mode endpoint, and request signing.

slack_sdk talks ``urllib`` (sync) and ``aiohttp`` (async), so neither
``responses`` nor ``unittest.mock`` can stand in for Slack (protocols.md,
trap 1). ``FakeSlackApi`` is a threaded ``http.server`` on 127.0.0.1, port 0,
that records every call (``calls``, ``calls_to(method)``) and keeps the
messages it was sent per channel, so ``conversations.history`` /
``replies`` hand back what was posted - metadata included when asked with
``include_all_metadata`` - and the find-my-own-message path is exercised for
real. ``fail(method, ...)`` makes the next calls answer 429 / 500 / an
``ok: false`` error.

It is as strict as Slack about what a message may hold: a text object over
3,000 characters or a block that slack_sdk's Block Kit models refuse is
``invalid_blocks``, more than 50 blocks too, and more than 12,000 characters
of block text in one message ``msg_blocks_too_long``. Every refusal of that
kind is also kept in ``refused``, and leaving the fake (``stop``) fails the
test when there is one, unless the test said ``allow_invalid = True``: a
message loopbot sends that Slack would refuse fails its test even where the
test never looks at that message. Files arrive as ``files_upload_v2`` sends
them: ``files.getUploadURLExternal`` (needs ``files:write``), the bytes to
the upload URL it names (served here), ``files.completeUploadExternal``,
which shares them into the thread; ``files`` holds what arrived.

``FakeSocketMode`` serves Slack's Socket Mode WebSocket (``websockets``):
it says hello, sends envelopes and returns the acknowledgement the app sent.
``signed_headers`` signs an inbound request exactly as Slack does.

This module is the fake's front door: its state, lifecycle and test
controls. The HTTP side is slack_http.py, the methods' answers
slack_methods.py (with slack_blocks.py and slack_files.py), the Socket Mode
endpoint slack_socket.py.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from .slack_blocks import block_problem
from .slack_files import BOT_USER
from .slack_http import Call, handler_class
from .slack_methods import SlackMethods
from .slack_socket import FakeSocketMode

__all__ = ["Call", "FakeSlackApi", "FakeSocketMode", "block_problem", "signed_headers", "slash_command", "BOT_TOKEN",
           "APP_TOKEN", "BOT_USER"]

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"


@dataclass
class _Failure:
    times: int | None  # None: every call
    status: int = 200
    error: str = ""
    retry_after: float | str | None = None  # a str is sent as written ("inf", "nan", "1e20")
    extra: dict[str, Any] = field(default_factory=dict)
    skip: int = 0  # let this many calls through first


def signed_headers(
    secret: str, body: str | bytes, *, timestamp: int | None = None, json_body: bool = False, **extra: str
) -> dict[str, str]:
    """The headers Slack sends with ``body``: a v0 signature over ``v0:<timestamp>:<body>``."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    content_type = "application/json" if json_body else "application/x-www-form-urlencoded"
    return {
        "content-type": content_type,
        "x-slack-request-timestamp": ts,
        "x-slack-signature": signature,
        **extra,
    }


def slash_command(user: str, text: str, *, trigger_id: str, channel: str = "C0123") -> str:
    """The form body Slack POSTs for ``/loopbot <text>`` typed by ``user`` in ``channel`` (sign it with
    ``signed_headers``)."""
    return urlencode({"token": "x", "team_id": "T0", "team_domain": "test", "channel_id": channel,
                      "channel_name": "ops", "user_id": user, "user_name": user.lower(), "command": "/loopbot",
                      "text": text, "response_url": "https://hooks.slack.test/commands/1", "api_app_id": "A0",
                      "trigger_id": trigger_id})


class FakeSlackApi(SlackMethods):
    """``with FakeSlackApi() as slack: WebClient(BOT_TOKEN, base_url=slack.base_url)``."""

    def __init__(self, *, usergroups: dict[str, list[str]] | None = None,
                 members: dict[str, list[str]] | None = None) -> None:
        self.calls: list[Call] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.usergroups: dict[str, list[str]] = dict(usergroups or {})
        #: channel -> its members, for ``conversations.members`` (a channel not named here: channel_not_found).
        self.members: dict[str, list[str]] = dict(members or {})
        self.socket_url: str | None = None
        #: What auth.test reports in ``x-oauth-scopes`` (None: no header).
        self.scopes: list[str] | None = [
            "app_mentions:read", "channels:history", "channels:read", "chat:write", "commands", "groups:history",
            "groups:read", "reactions:write", "usergroups:read", "files:write",
        ]
        #: Messages Slack would have refused: (method, error, what was wrong).
        self.refused: list[tuple[str, str, str]] = []
        #: A test that sends invalid messages on purpose sets this, so that ``stop`` does not fail it.
        self.allow_invalid = False
        #: file id -> {"filename", "title", "length", "content" (bytes, once uploaded), "channel", "thread_ts"}.
        self.files: dict[str, dict[str, Any]] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._stalls: dict[str, list[list[Any]]] = {}  # method -> [[calls to let through first, release event]]
        self._lock = threading.Lock()
        self._ts = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-slack", daemon=True)

    # --- lifecycle -------------------------------------------------------------
    def start(self) -> FakeSlackApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self.refused and not self.allow_invalid:
            raise AssertionError(f"Slack would have refused {len(self.refused)} message(s): {self.refused[:3]}")

    def __enter__(self) -> FakeSlackApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/api/"

    @property
    def response_url(self) -> str:
        """A URL to put in a payload's ``response_url``; posts to it are recorded as method "response_url"."""
        return self.base_url.replace("/api/", "/response/") + "T0TEAM/1/abc"

    # --- test controls ---------------------------------------------------------
    def fail(
        self,
        method: str,
        *,
        status: int = 200,
        error: str = "",
        times: int | None = 1,
        retry_after: float | str | None = None,
        skip: int = 0,
        **extra: Any,
    ) -> None:
        """After ``skip`` calls, the next ``times`` calls of ``method`` answer ``status`` (429, 500) or ``error``."""
        with self._lock:
            self._failures.setdefault(method, []).append(_Failure(times, status, error, retry_after, extra, skip))

    def stall(self, method: str, *, skip: int = 0) -> threading.Event:
        """After ``skip`` calls, the next call of ``method`` is carried out but its answer waits for the event.

        The bot's request has taken effect in Slack (the message is posted)
        while the bot has heard nothing back: the moment a crash is worst.
        """
        release = threading.Event()
        with self._lock:
            self._stalls.setdefault(method, []).append([skip, release])
        return release

    def _stall_for(self, method: str) -> threading.Event | None:
        queue = self._stalls.get(method)
        if not queue:
            return None
        if queue[0][0] > 0:
            queue[0][0] -= 1
            return None
        return queue.pop(0)[1]

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [call for call in self.calls if call.method == method]

    def channel_messages(self, channel: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(message) for message in self.messages.get(channel, [])]

    def post(self, channel: str, text: str, **fields: Any) -> dict[str, Any]:
        """Put a message into a channel as if someone else posted it."""
        with self._lock:
            return self._store(channel, {"text": text, "user": "U0OTHER", **fields})

    def _failure_for(self, method: str) -> _Failure | None:
        queue = self._failures.get(method)
        if not queue:
            return None
        failure = queue[0]
        if failure.skip > 0:
            failure.skip -= 1
            return None
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                queue.pop(0)
        return failure
