"""Where does Slack POST to? ``slack_route``: ``POST /slack/events`` for commands, interactivity and events.

The route is open to anyone who can reach the bot, so before Bolt sees a
request it must pass, in this order, each check costing no more than the
bytes it has read:

* **Size.** A body over ``MAX_BODY`` (512 KiB) is answered 413 - at once
  when ``Content-Length`` says so, otherwise as soon as the streamed bytes
  pass the cap - so an unsigned 100 MB request never sits in memory. Slack's
  requests are a few kB; the largest is a button click (``block_actions``),
  which carries the clicked message: at most 50 blocks of at most 3,000
  characters, URL-encoded (an ASCII character takes up to 3 bytes as
  ``%XX``): 450,000 bytes, and the rest of the payload fits in what is left.
  (Text that is mostly non-ASCII could exceed it, but loopbot's review
  messages are usually a few kB, and the cap must stay well under 1 MB.)
* **Timestamp.** ``X-Slack-Request-Timestamp`` must be decimal digits and
  at most ``MAX_AGE`` (5 minutes, Slack's rule) from now; otherwise 401.
* **Signature.** The v0 HMAC of ``v0:<timestamp>:<raw body>`` with the
  signing secret (``slack_sdk``'s ``SignatureVerifier``); otherwise 401
  (a body that is not UTF-8, as Slack's always are, is a 400).
  Only a signed body is ever parsed, by Bolt, which checks the signature
  again and runs the listeners; a signed body Bolt cannot read is a 400.

A refusal is logged as one short line naming the reason - never the body or
a header's value - and the same reason is counted, not repeated, within the
log's repeat interval (the record's ``repeat_key``); an oversized body is
refused without a line at all.
"""

from __future__ import annotations

import hmac
import logging
import re
import time
from collections.abc import Callable

from slack_bolt.adapter.starlette.async_handler import to_async_bolt_request, to_starlette_response
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["MAX_AGE", "MAX_BODY", "SLACK_EVENTS_PATH", "slack_route"]

log = logging.getLogger(__name__)

SLACK_EVENTS_PATH = "/slack/events"

#: Bytes of request body accepted (see the module docstring for why this size).
MAX_BODY = 512 * 1024

#: Seconds a request's timestamp may be away from now (Slack's own rule).
MAX_AGE = 5 * 60

_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # ASCII digits only: int() would also take " 12", "1_0" and "١٢"


class _Refused(Exception):
    """Answer ``status``; log ``reason`` (None: nothing), counted as a repeat of others with the same ``kind``."""

    def __init__(self, status: int, reason: str | None = None, kind: str | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.kind = status, reason, kind or reason


async def _body(request: Request, cap: int) -> bytes:
    """The whole body, or ``_Refused(413)`` once it is known to exceed ``cap`` bytes."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > cap:
        raise _Refused(413)
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > cap:
                raise _Refused(413)
    except ClientDisconnect:  # gone before the whole body came: nobody reads the answer
        raise _Refused(400) from None
    return bytes(body)


def _verify(verifier: SignatureVerifier, request: Request, body: bytes, now: float) -> None:
    timestamp = request.headers.get("x-slack-request-timestamp")
    signature = request.headers.get("x-slack-signature")
    if timestamp is None or signature is None:
        raise _Refused(401, "no X-Slack-Request-Timestamp or X-Slack-Signature header")
    if not _TIMESTAMP.fullmatch(timestamp):
        raise _Refused(401, "the timestamp header is not a number of seconds")
    age = round(now - int(timestamp))
    if age > MAX_AGE:
        raise _Refused(401, f"timestamp {age} s old: check the clock", "clock")
    if age < -MAX_AGE:
        raise _Refused(401, f"timestamp {-age} s ahead: check the clock", "clock")
    try:
        text = body.decode("utf-8")  # Slack's bodies are UTF-8, and slack_sdk signs text
    except UnicodeDecodeError:
        raise _Refused(400, "a body that is not UTF-8") from None
    expected = verifier.generate_signature(timestamp=timestamp, body=text)
    if expected is None or not hmac.compare_digest(expected.encode(), signature.encode()):
        raise _Refused(401, "bad signature: is slack.signing_secret the Slack app's?")


def slack_route(
    app: AsyncApp, *, signing_secret: str, path: str = SLACK_EVENTS_PATH, clock: Callable[[], float] = time.time,
) -> Route:
    """A Starlette route that hands every request Slack signed to ``app`` (``clock``: seconds, for tests)."""
    verifier = SignatureVerifier(signing_secret)

    async def slack_events(request: Request) -> Response:
        try:
            body = await _body(request, MAX_BODY)
            _verify(verifier, request, body, clock())
            try:
                bolt_request = to_async_bolt_request(request, body)
            except (ValueError, RecursionError, AttributeError, TypeError):  # not the JSON or form Slack sends
                raise _Refused(400, "a signed body that is not Slack's JSON or form") from None
        except _Refused as refused:
            if refused.reason is not None:
                log.warning("slack: refused a request: %s", refused.reason,
                            extra={"repeat_key": f"slack: refused: {refused.kind}"})
            headers = {"connection": "close"} if refused.status == 413 else None  # the rest is not read
            return JSONResponse({"error": "request refused"}, status_code=refused.status, headers=headers)
        return to_starlette_response(await app.async_dispatch(bolt_request))

    return Route(path, slack_events, methods=["POST"], name="slack_events")
