"""adapters.slack: reviews in Slack threads, answers from slash commands, buttons, modals and @-mentions.

``SlackChannel`` posts (sync ``WebClient``, for the bot's outbox);
``build_app`` / ``slack_route`` / ``SocketModeRunner`` take answers in (Bolt's
``AsyncApp``). Import the listeners and Socket Mode modules only where Slack is
configured: they load slack_bolt and aiohttp.
"""

from .channel import SlackChannel
from .check import REQUIRED_SCOPES, check_connection
from .client import DEFAULT_API_BASE_URL, SlackClient
from .directory import SlackDirectory
from .render import render_review

__all__ = [
    "DEFAULT_API_BASE_URL",
    "REQUIRED_SCOPES",
    "SlackChannel",
    "SlackClient",
    "SlackDirectory",
    "check_connection",
    "render_review",
]
