"""What ``adapters.slack.listeners`` relies on in Bolt: if one of these fails, Bolt changed under ``_after_ack``.

The listeners ack from the listener and carry on in a task of their own
(``_after_ack``) instead of Bolt's lazy listeners, because the vote already
under way when the ack goes out is an asyncio future, and a lazy listener
gets a deep copy of the request's context, without it.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlencode

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi, signed_headers

SECRET = "test-signing-secret"


def test_a_lazy_listener_gets_no_future_begun_before_the_ack() -> None:
    """The reason for ``_after_ack``: once Bolt passes such a value on, lazy listeners could carry the vote."""

    async def copied() -> AsyncBoltContext:
        vote = asyncio.get_running_loop().create_future()
        context = AsyncBoltContext({"vote": vote, "user_id": "U0AAA", "logger": logging.getLogger(__name__)})
        return context.to_copyable()

    context = asyncio.run(copied())
    assert "vote" not in context and context["user_id"] == "U0AAA"


def test_with_process_before_response_the_ack_is_sent_once_the_listener_returns_and_its_task_runs_on(
    slack: FakeSlackApi,
) -> None:
    """``_after_ack``'s contract: Bolt answers with what the listener acked when it returns, not before, and a
    task the listener started is still running then and completes on the same loop afterwards."""
    app = AsyncApp(signing_secret=SECRET, client=AsyncWebClient(token=BOT_TOKEN, base_url=slack.base_url),
                   name="contract", process_before_response=True)
    followed = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    order: list[str] = []

    async def follow_up() -> None:
        await asyncio.sleep(0.01)
        order.append("follow-up")
        followed.set()

    @app.command("/loopbot")
    async def command(ack: object) -> None:
        await ack(text="counted")  # type: ignore[operator]
        tasks.append(asyncio.ensure_future(follow_up()))
        order.append("listener returned")

    body = urlencode({"command": "/loopbot", "text": "approve demo-1", "user_id": "U0AAA", "team_id": "T1",
                      "channel_id": "C1", "trigger_id": "1.2.3", "response_url": "https://example.invalid/r"})

    async def dispatch() -> tuple[int, str, bool, list[str]]:
        request = AsyncBoltRequest(body=body, headers=signed_headers(SECRET, body))
        response = await app.async_dispatch(request)
        pending = not followed.is_set()
        await asyncio.wait_for(followed.wait(), 5)
        return response.status, response.body, pending, order

    status, text, pending, seen = asyncio.run(dispatch())
    assert status == 200 and "counted" in text
    assert pending, "the response came before the follow-up finished"
    assert seen == ["listener returned", "follow-up"]
