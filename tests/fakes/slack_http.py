"""The fake Slack's HTTP server side: a request in, its ``Call`` recorded, tokens checked, Slack's answer out.

``handler_class(fake)`` is the ``http.server`` handler of a ``FakeSlackApi``:
it parses the form or JSON body as slack_sdk sends it, records the call,
refuses a missing or wrong token as Slack does, answers a failure the test
queued (``fake.fail``), holds an answer the test stalled (``fake.stall``),
and otherwise sends what ``fake.answer`` says. File bytes posted to the
upload URL go to ``fake._receive_upload``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

if TYPE_CHECKING:
    from .slack_api import FakeSlackApi

__all__ = ["Call", "handler_class"]

#: Parameters slack_sdk may send as JSON strings inside a form body.
_JSON_PARAMS = ("blocks", "metadata", "view", "attachments", "files")


@dataclass
class Call:
    """One request the fake received."""

    method: str
    params: dict[str, Any]
    token: str


def handler_class(fake: FakeSlackApi) -> type[BaseHTTPRequestHandler]:
    """The request handler serving ``fake``."""

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
