"""The Slack channel in this bot: from the ``slack:`` block to a posting channel, a route and a membership.

HTTP mode mounts ``POST /slack/events`` (Bolt verifies Slack's signatures);
with ``slack.app_token`` the same Bolt app runs over Socket Mode instead, so
no public URL is needed. Slack's answers go back in the acknowledgement, so
its handler is the vote path itself; user groups are asked of
``usergroups.users.list`` through a short cache.

Who may answer a loop with no ``reviewers`` block on Slack: the members of
the channel the review was posted to (``conversations.members``, through the
same cache), not any member of the workspace writing from anywhere.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adapters.slack import SlackChannel, SlackClient, SlackDirectory, check_connection
from adapters.vote_batches import VoteStages, VotesHandler

from bot.config_blocks import SlackConfig
from bot.review_records import Reviewers

from .authorize import ListMembership

if TYPE_CHECKING:  # pragma: no cover - slack_bolt loads only when Slack is configured
    from slack_bolt.async_app import AsyncApp
    from starlette.routing import BaseRoute

    from adapters.slack.socket import SocketModeRunner

__all__ = ["SlackKit", "SlackMembership"]

log = logging.getLogger(__name__)


class SlackMembership:
    """Slack's check: the reviewers' lists and groups, or without a reviewers block the review channel's members."""

    always_checks = True  # without reviewers it still checks: the voter must be in the review's channel

    def __init__(self, directory: SlackDirectory) -> None:
        self._directory = directory
        self._lists = ListMembership("slack", self._in_groups)

    def _in_groups(self, reviewers: Reviewers, user: str) -> bool:
        return any(self._directory.is_member(group, user) for group in reviewers.slack_groups or [])

    def refusal(self, reviewers: Reviewers, account: str, where: Mapping[str, Any]) -> str | None:
        if not reviewers.anyone:
            return self._lists.refusal(reviewers, account, where)
        channel = str(where.get("channel") or "")
        if not channel:
            return ("this review was not posted to a Slack channel and its loop names no reviewers, "
                    "so nobody may answer it from Slack")
        if self._directory.in_channel(channel, account):
            return None
        return (f"slack:{account} is not a member of channel {channel}, where this review was posted: "
                "its loop names no reviewers, so only that channel's members may answer")


class SlackKit:
    """Everything the bot needs of Slack, built from its config block."""

    name = "slack"

    def __init__(self, config: SlackConfig) -> None:
        self._config = config
        self.client = SlackClient(config.bot_token.get_secret_value(), base_url=config.api_base_url)
        self.channel = SlackChannel(self.client, command=config.command)
        self.directory = SlackDirectory(self.client)
        self.membership = SlackMembership(self.directory)
        self._socket: SocketModeRunner | None = None

    @property
    def socket_mode(self) -> bool:
        return self._config.app_token is not None

    def _app(self, handler: VoteStages[Any] | VotesHandler) -> AsyncApp:
        from adapters.slack.listeners import build_app

        signing = self._config.signing_secret
        # Socket Mode requests arrive over Slack's own authenticated WebSocket, never over HTTP,
        # so without a signing secret a random one keeps the (unmounted) HTTP path closed.
        secret = signing.get_secret_value() if signing is not None else secrets.token_hex(32)
        return build_app(signing_secret=secret, handler=handler, bot_token=self._config.bot_token.get_secret_value(),
                         api_base_url=self._config.api_base_url, command=self._config.command)

    def routes(self, handler: VoteStages[Any] | VotesHandler) -> Sequence[BaseRoute]:
        """``POST /slack/events``, unless Socket Mode carries the requests."""
        if self.socket_mode:
            return []
        from adapters.slack.route import slack_route

        assert self._config.signing_secret is not None  # the config requires it without slack.app_token
        return [slack_route(self._app(handler), signing_secret=self._config.signing_secret.get_secret_value())]

    def start(self, handler: VoteStages[Any] | VotesHandler) -> None:
        if not self.socket_mode:
            return
        from adapters.slack.socket import SocketModeRunner

        assert self._config.app_token is not None
        self._socket = SocketModeRunner(self._app(handler), self._config.app_token.get_secret_value())
        self._socket.start()
        log.info("slack: connected over Socket Mode")

    def stop(self) -> None:
        if self._socket is not None:
            self._socket.stop()

    def check(self, channels: Sequence[str]) -> str:
        """``auth.test`` and channel membership, for ``loopbot check``; ChannelError says what is wrong."""
        return check_connection(self.client, channels)
