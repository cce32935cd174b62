"""``slack_route`` in process: what it refuses before Bolt, with an injectable clock and a raw ASGI receive."""

from __future__ import annotations

import logging
import time
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from adapters.slack.listeners import build_app
from adapters.slack.route import MAX_BODY, slack_route
from adapters.vote_batches import one_by_one
from adapters.channel import Answer, AnswerKind, Reply
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi, signed_headers

SECRET = "route-signing-secret"


def answer(reply: Reply) -> Answer:
    return Answer(AnswerKind.COUNTED, "counted", reply.review_id)


def server(slack: FakeSlackApi, now: float = 0.0) -> Starlette:
    """The route with its clock stopped at ``now`` (Bolt checks the age again, with the real clock)."""
    app = build_app(signing_secret=SECRET, handler=one_by_one(answer), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    return Starlette(routes=[slack_route(app, signing_secret=SECRET, clock=lambda: now)])


async def post(app: Starlette, body: str, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://slack.test") as http:
        return await http.post("/slack/events", content=body, headers=headers)


@pytest.mark.parametrize(("offset", "said"), [
    (-600, "timestamp 600 s old: check the clock"),
    (601, "timestamp 601 s ahead: check the clock"),
    (-290, None),  # in time: the signature is checked, holds, and Bolt answers
])
async def test_the_age_of_a_request_is_checked_with_the_clock(slack: FakeSlackApi, caplog: pytest.LogCaptureFixture,
                                                              offset: int, said: str | None) -> None:
    now = int(time.time())
    body = "command=%2Floopbot&text=help&user_id=U0AAA&channel_id=C0AAA&trigger_id=1.2.3"
    with caplog.at_level(logging.INFO, logger="adapters.slack.route"):
        response = await post(server(slack, now + 0.4), body, signed_headers(SECRET, body, timestamp=now + offset))
    refusals = [r.getMessage() for r in caplog.records if r.name == "adapters.slack.route"]
    if said is None:
        assert response.status_code == 200 and refusals == []
    else:
        assert response.status_code == 401 and refusals == [f"slack: refused a request: {said}"]


async def test_an_announced_oversized_body_is_refused_without_reading_it(slack: FakeSlackApi) -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/slack/events", "raw_path": b"/slack/events",
             "query_string": b"", "root_path": "", "scheme": "http", "server": ("t", 80), "client": ("c", 1),
             "http_version": "1.1", "asgi": {"version": "3.0"},
             "headers": [(b"content-length", str(MAX_BODY + 1).encode()), (b"host", b"t")]}
    await server(slack)(scope, receive, send)
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]


async def test_a_streamed_body_is_cut_off_at_the_cap(slack: FakeSlackApi) -> None:
    pieces = iter([b"text=" + b"x" * (64 * 1024)] * 100)
    read = 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": next(pieces), "more_body": True}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/slack/events", "raw_path": b"/slack/events",
             "query_string": b"", "root_path": "", "scheme": "http", "server": ("t", 80), "client": ("c", 1),
             "http_version": "1.1", "asgi": {"version": "3.0"}, "headers": [(b"host", b"t")]}
    await server(slack)(scope, receive, send)
    assert sent[0]["status"] == 413
    assert read == MAX_BODY // (64 * 1024 + 5) + 1  # the piece that passed the cap was the last one read
