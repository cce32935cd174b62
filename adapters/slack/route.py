"""Where does Slack POST to? ``slack_route``: ``POST /slack/events`` for commands, interactivity and events.

Bolt's own Starlette adapter translates the request; Bolt checks the
signature (HMAC of ``v0:<timestamp>:<raw body>`` with the signing secret, at
most 5 minutes old) and answers 401 without calling any listener when it
does not hold.
"""

from __future__ import annotations

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.app.async_app import AsyncApp
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["SLACK_EVENTS_PATH", "slack_route"]

SLACK_EVENTS_PATH = "/slack/events"


def slack_route(app: AsyncApp, path: str = SLACK_EVENTS_PATH) -> Route:
    """A Starlette route that hands every Slack request to ``app``."""
    handler = AsyncSlackRequestHandler(app)

    async def slack_events(request: Request) -> Response:
        response: Response = await handler.handle(request)
        return response

    return Route(path, slack_events, methods=["POST"], name="slack_events")
