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
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.signature import SignatureVerifier

from .slack_blocks import block_problem
from .slack_files import BOT_USER, FileUploads

__all__ = ["Call", "FakeSlackApi", "FakeSocketMode", "block_problem", "signed_headers", "BOT_TOKEN", "APP_TOKEN",
           "BOT_USER"]

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM = "T0TEAM"

#: Parameters slack_sdk may send as JSON strings inside a form body.
_JSON_PARAMS = ("blocks", "metadata", "view", "attachments", "files")


@dataclass
class Call:
    """One request the fake received."""

    method: str
    params: dict[str, Any]
    token: str


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


class FakeSlackApi(FileUploads):
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
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
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

    # --- the API -----------------------------------------------------------------
    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _store(self, channel: str, message: dict[str, Any]) -> dict[str, Any]:
        message = {"type": "message", "ts": self._next_ts(), **message}
        self.messages.setdefault(channel, []).append(message)
        return message

    def _find(self, channel: str, ts: str) -> dict[str, Any] | None:
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    @staticmethod
    def _shown(message: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        shown = dict(message)
        if not _truthy(params.get("include_all_metadata")):
            shown.pop("metadata", None)
        return shown

    def _page(self, found: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        limit = int(params.get("limit") or 100)
        start = int(params.get("cursor") or 0)
        page = found[start:start + limit]
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": [self._shown(m, params) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _members(self, channel: str, params: dict[str, Any]) -> dict[str, Any]:
        """``conversations.members`` as Slack pages it: ``limit`` (at most 1,000) per page, an opaque cursor."""
        if self.scopes is not None and not {"channels:read", "groups:read"} & set(self.scopes):
            return {"ok": False, "error": "missing_scope", "needed": "channels:read,groups:read"}
        if channel not in self.members:
            return {"ok": False, "error": "channel_not_found"}
        limit = int(params.get("limit") or 100)
        if not 1 <= limit <= 1000:
            return {"ok": False, "error": "invalid_limit"}
        cursor = str(params.get("cursor") or "")
        try:
            start = int(cursor.removeprefix("dXNlcjo")) if cursor else 0
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        users = self.members[channel]
        more = start + limit < len(users)
        return {"ok": True, "members": list(users[start:start + limit]),
                "response_metadata": {"next_cursor": f"dXNlcjo{start + limit}" if more else ""}}

    def _refuse(self, method: str, error: str, detail: str) -> dict[str, Any]:
        self.refused.append((method, error, detail))
        return {"ok": False, "error": error, "response_metadata": {"messages": [f"[ERROR] {detail}"]}}

    def _check_blocks(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's answer to a message it would refuse (``invalid_blocks``, ``msg_blocks_too_long``), else None."""
        blocks = params.get("blocks")
        if blocks is None:
            return None
        problem = block_problem(blocks)
        if problem is not None:
            return self._refuse(method, *problem)
        return None

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:  # noqa: C901 - one branch per method
        channel = str(params.get("channel", ""))
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            refused = self._check_blocks(method, params)
            if refused is not None:
                return refused
        if method == "files.getUploadURLExternal":
            return self._get_upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete_upload(params)
        if method == "auth.test":
            return {"ok": True, "url": "https://test.slack.com/", "team": "Test Team", "user": "loopbot",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT"}
        if method == "chat.postMessage":
            message: dict[str, Any] = {"text": params.get("text", ""), "bot_id": "B0BOT", "user": BOT_USER}
            for key in ("blocks", "metadata", "thread_ts"):
                if params.get(key) is not None:
                    message[key] = params[key]
            if _truthy(params.get("reply_broadcast")):
                message["subtype"] = "thread_broadcast"
            stored = self._store(channel, message)
            if "thread_ts" in message:
                parent = self._find(channel, message["thread_ts"])
                if parent is not None:
                    parent["thread_ts"] = parent["ts"]
                    parent["reply_count"] = parent.get("reply_count", 0) + 1
            return {"ok": True, "channel": channel, "ts": stored["ts"], "message": dict(stored)}
        if method == "chat.update":
            target = self._find(channel, str(params.get("ts")))
            if target is None:
                return {"ok": False, "error": "message_not_found"}
            for key in ("text", "blocks", "metadata"):
                if params.get(key) is not None:
                    target[key] = params[key]
            target["edited"] = {"user": BOT_USER}
            return {"ok": True, "channel": channel, "ts": target["ts"], "text": target.get("text", "")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "conversations.history":
            top = [m for m in self.messages.get(channel, [])
                   if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"]
            return self._page(list(reversed(top)), params)  # newest first, as Slack answers
        if method == "conversations.replies":
            ts = str(params.get("ts"))
            parent = self._find(channel, ts)
            if parent is None:
                return {"ok": False, "error": "thread_not_found"}
            thread = [parent] + [
                m for m in self.messages.get(channel, []) if m.get("thread_ts") == ts and m is not parent
            ]
            return self._page(thread, params)
        if method == "reactions.add":
            return {"ok": True}
        if method == "conversations.members":
            return self._members(channel, params)
        if method == "usergroups.users.list":
            group = str(params.get("usergroup", ""))
            if group not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(self.usergroups[group])}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{uuid.uuid4().hex[:8].upper()}", **(params.get("view") or {})}}
        if method == "apps.connections.open":
            if self.socket_url is None:
                return {"ok": False, "error": "socket_mode_not_enabled"}
            return {"ok": True, "url": self.socket_url}
        if method == "response_url":
            return {"ok": True}
        return {"ok": False, "error": "unknown_method"}

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

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                if self.path.startswith("/upload/"):  # a file's bytes, as files_upload_v2 sends them
                    status, text = fake._receive_upload(self.path, self.rfile.read(length) if length else b"")
                    raw_answer = text.encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(raw_answer)))
                    self.end_headers()
                    self.wfile.write(raw_answer)
                    return
                raw = self.rfile.read(length).decode("utf-8") if length else ""
                params = _parse_body(raw, self.headers.get("Content-Type", ""))
                if self.path.startswith("/response/"):
                    method = "response_url"
                else:
                    method = self.path.split("/api/", 1)[-1].split("?", 1)[0]
                    params.update(dict(parse_qsl(self.path.partition("?")[2])))
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ").strip()
                with fake._lock:
                    fake.calls.append(Call(method, params, token))
                    if method != "response_url":
                        wanted = "xapp-" if method == "apps.connections.open" else "xoxb-"
                        if not token:
                            return self._send(200, {"ok": False, "error": "not_authed"})
                        if not token.startswith(wanted):
                            return self._send(200, {"ok": False, "error": "invalid_auth"})
                    failure = fake._failure_for(method)
                    if failure is not None:
                        wait = failure.retry_after
                        headers = {} if wait is None else {"Retry-After": _header_value(wait)}
                        if failure.status != 200:
                            return self._send(failure.status, {"ok": False, "error": failure.error or "fake_failure"},
                                              headers)
                        return self._send(200, {"ok": False, "error": failure.error, **failure.extra}, headers)
                    body = fake.answer(method, params)
                    scopes = fake.scopes
                    held = fake._stall_for(method)
                if held is not None:
                    held.wait(30)
                headers = {"x-oauth-scopes": ",".join(scopes)} if method == "auth.test" and scopes is not None else {}
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a stalled caller may be gone
                    self._send(200, body, headers)

        return Handler


def _header_value(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:g}"


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


def _parse_body(raw: str, content_type: str) -> dict[str, Any]:
    if not raw:
        return {}
    if "json" in content_type:
        parsed = json.loads(raw)
        return dict(parsed) if isinstance(parsed, dict) else {"_body": parsed}
    params: dict[str, Any] = dict(parse_qsl(raw, keep_blank_values=True))
    for key in _JSON_PARAMS:
        if isinstance(params.get(key), str) and params[key][:1] in "[{":
            params[key] = json.loads(params[key])
    return params


class FakeSocketMode:
    """Slack's Socket Mode endpoint on ws://127.0.0.1:PORT/link, in its own thread and event loop.

    ``send(envelope_type, payload)`` delivers one envelope to the connected
    app and returns the acknowledgement it sent back (``{"envelope_id",
    "payload"?}``).
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-socket-mode", daemon=True)
        self._server: Any = None
        self._connections: list[Any] = []
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.connected = threading.Event()
        self.received: list[dict[str, Any]] = []

    def start(self) -> FakeSocketMode:
        from websockets.asyncio.server import serve

        self._thread.start()

        async def open_server() -> Any:
            return await serve(self._serve, "127.0.0.1", 0)

        self._server = asyncio.run_coroutine_threadsafe(open_server(), self._loop).result(5)
        return self

    @property
    def url(self) -> str:
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/link"

    async def _serve(self, connection: Any) -> None:
        self._connections.append(connection)
        await connection.send(json.dumps({"type": "hello", "num_connections": 1,
                                          "connection_info": {"app_id": "A0APP"}}))
        self.connected.set()
        try:
            async for raw in connection:
                message = json.loads(raw)
                self.received.append(message)
                future = self._acks.get(message.get("envelope_id", ""))
                if future is not None and not future.done():
                    future.set_result(message)
        finally:
            self._connections.remove(connection)
            if not self._connections:
                self.connected.clear()

    def send(self, envelope_type: str, payload: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        """Deliver an envelope and wait for the app's ack."""
        envelope_id = str(uuid.uuid4())

        async def deliver() -> dict[str, Any]:
            future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
            self._acks[envelope_id] = future
            envelope = {"envelope_id": envelope_id, "type": envelope_type, "payload": payload,
                        "accepts_response_payload": envelope_type != "events_api"}
            await self._connections[-1].send(json.dumps(envelope))
            return await asyncio.wait_for(future, timeout)

        return asyncio.run_coroutine_threadsafe(deliver(), self._loop).result(timeout + 1)

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
