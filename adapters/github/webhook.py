"""Is this request really from GitHub, and what votes does it carry? The ``POST /github/webhook`` route.

Order of work, cheapest refusal first: size (``Content-Length``, then
counted while reading; over 25 MB -> 413), signature (``X-Hub-Signature-256``,
HMAC-SHA256 of the raw body, any of several secrets so they can be rotated,
compared in constant time; missing or wrong -> 401, nothing recorded), then
the event (``ping`` -> 200 pong; events loopbot does not read -> 202), the
JSON (malformed -> 400), the votes (``events.replies_from_event``), and only
for a delivery that carries votes ``accept([(KEY, replies), ...])``, which
records the deliveries and queues their votes in one durable step (a
redelivery -> 200 duplicate). The deliveries that arrive while one such step
is in flight wait on the event loop and go in the next one, together: one
hop to the route's recording thread per commit, not one per request.
``KEY`` comes from the signed body (``events.delivery_key``: the comment's
id, or the label, its author and time), not from the unsigned
``X-GitHub-Delivery`` header: the same body sent again under a fresh
delivery id is the same delivery. The votes are cast after the answer, from
the bot's queue: GitHub waits at most 10 s, and the answer must not wait
for the votes of a burst.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..channel import Reply
from .identity import BotIdentity
from .events import EVENTS, delivery_key, replies_from_event

__all__ = ["MAX_BODY_BYTES", "sign", "signature_ok", "webhook_route"]

log = logging.getLogger(__name__)

#: GitHub caps webhook payloads at 25 MB.
MAX_BODY_BYTES = 25 * 1024 * 1024
#: ``accept(deliveries)``: record each (key, votes) durably in one step; for each, was its key new?
Accept = Callable[[Sequence[tuple[str, list[Reply]]]], list[bool]]


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def signature_ok(secrets: Sequence[str], body: bytes, header: str | None) -> bool:
    """Does ``header`` sign ``body`` with any of ``secrets``? Every secret is tried (no early exit)."""
    if not header or not header.startswith("sha256="):
        return False
    given = header.encode("ascii", "replace")
    matched = False
    for secret in secrets:
        matched |= hmac.compare_digest(sign(secret, body).encode("ascii"), given)
    return matched


class _TooLarge(Exception):
    pass


class _GroupCommit:
    """Deliveries recorded together: one ``accept`` call at a time, each taking every delivery that waited.

    Runs on the event loop; only ``accept`` itself goes to the recording thread, and its answer comes back
    in one hop for the whole batch. Each delivery's request waits for its own batch to be committed.
    """

    def __init__(self, accept: Accept) -> None:
        self._accept = accept
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="github-webhook")
        self._waiting: list[tuple[str, list[Reply], asyncio.Future[bool]]] = []
        self._recording: asyncio.Task[None] | None = None  # held: the loop keeps only weak references to tasks

    async def record(self, key: str, replies: list[Reply]) -> bool:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((key, replies, done))
        if self._recording is None:
            self._recording = asyncio.get_running_loop().create_task(self._record_waiting())
        return await done

    async def _record_waiting(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                try:
                    new = await loop.run_in_executor(self._thread, self._accept,
                                                     [(key, replies) for key, replies, _done in batch])
                except Exception as err:  # each request of the batch fails with it (a 500: GitHub retries)
                    for _key, _replies, done in batch:
                        if not done.done():
                            done.set_exception(err)
                    continue
                except BaseException:  # the loop is stopping: so are the requests waiting on it
                    for _key, _replies, done in [*batch, *self._waiting]:
                        done.cancel()
                    raise
                for (_key, _replies, done), first in zip(batch, new, strict=True):
                    if not done.done():
                        done.set_result(first)
        finally:
            self._recording = None


async def _read_body(request: Request, limit: int) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _payload(body: bytes, content_type: str) -> Any:
    """The JSON document, sent as JSON or as the form field ``payload`` (a hook's other content type)."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        fields = parse_qs(body.decode("utf-8"), strict_parsing=True)
        return orjson.loads(fields["payload"][0])
    return orjson.loads(body)  # JSONDecodeError is a ValueError


def webhook_route(
    secrets: Sequence[str],
    accept: Accept,
    *,
    bot_login: BotIdentity | str | None = None,
    path: str = "/github/webhook",
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Route:
    """The Starlette route for GitHub webhooks.

    ``accept([(key, replies), ...])`` records each delivery's key (from its
    signed body) with its votes durably, all in one step, and says for each
    whether the key was new; the votes are cast later (the bot answers voters
    through its outbox). Called on the route's recording thread, one call at a
    time, only with deliveries whose signature was checked.
    ``bot_login``: loopbot's identity, shared with the channel that learns it.
    """
    me = BotIdentity.of(bot_login)
    keys = [secret for secret in secrets if secret]
    if not keys:
        raise ValueError("a GitHub webhook needs at least one secret (github.webhook_secret)")
    recording = _GroupCommit(accept)

    async def endpoint(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body_bytes)
        except _TooLarge:
            return JSONResponse({"error": "payload too large"}, status_code=413)
        if not signature_ok(keys, body, request.headers.get("x-hub-signature-256")):
            return JSONResponse({"error": "bad or missing X-Hub-Signature-256"}, status_code=401)
        event = request.headers.get("x-github-event", "")
        if event == "ping":
            return JSONResponse({"msg": "pong"})
        if event not in EVENTS:
            return JSONResponse({"ignored": event or "(no X-GitHub-Event)"}, status_code=202)
        try:
            payload = _payload(body, request.headers.get("content-type", ""))
        except (ValueError, KeyError, UnicodeDecodeError):
            return JSONResponse({"error": "body is not a JSON document"}, status_code=400)
        if not isinstance(payload, dict):
            return JSONResponse({"error": "body is not a JSON object"}, status_code=400)
        replies = replies_from_event(event, payload, bot_login=me)
        if not replies:
            return JSONResponse({"votes": 0}, status_code=202)
        key = delivery_key(replies)
        if not await recording.record(key, replies):
            return JSONResponse({"duplicate": key})
        log.debug("github %s delivery %s: %d vote(s) queued", event, key, len(replies))
        return JSONResponse({"votes": len(replies)})

    return Route(path, endpoint, methods=["POST"])
