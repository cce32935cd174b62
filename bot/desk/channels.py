"""Which channels this bot has: the local one always, Slack and GitHub when their blocks are configured.

``Channels`` builds each configured channel's kit once (its posting
channel, its membership check, its listeners) and joins them to the desk:
the outbox posts through them, and every answer they take in enters the one
vote path: Slack's through its two stages (``VoteBatches``: each request's
voter checked on its own, the votes checked meanwhile cast together,
answered in the acknowledgement), GitHub's by ``VotePath.handle_many`` - webhook
deliveries and polled comments alike - recorded first in the one
``AnswerQueue`` and cast from it in batches (answered through the outbox).
Importing this module loads no Slack or GitHub library; a kit's module
loads only when its block is configured.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from adapters.channel import Channel
from adapters.local import LocalChannel

from .authorize import Authorizer, ListMembership, Membership
from .people import People

if TYPE_CHECKING:  # pragma: no cover
    from starlette.routing import BaseRoute

    from bot.config import BotConfig
    from bot.store.base import Store

    from .desk import ReviewDesk
    from .github_wiring import GitHubKit
    from .answer_queue import AnswerQueue
    from .slack_wiring import SlackKit
    from .votes import VotePath

__all__ = ["LOCAL_REVIEWS_DIR", "local_channel", "Channels"]

#: Where the local channel writes ``<review id>.md`` under ``state_dir`` (the store keeps its own JSON apart).
LOCAL_REVIEWS_DIR = "local-reviews"


def local_channel(state_dir: Path, decide_command: str = "loopbot decide") -> LocalChannel:
    """The always-on channel of a bot on ``state_dir``; serve and `run` must agree on its folder."""
    return LocalChannel(Path(state_dir) / LOCAL_REVIEWS_DIR, decide_command=decide_command)


class Channels:
    """The local channel plus the configured Slack and GitHub kits of one bot."""

    def __init__(self, config: BotConfig, store: Store, decide_command: str = "loopbot decide") -> None:
        state_dir = Path(config.state_dir)
        self.local = local_channel(state_dir, decide_command)
        self.slack: SlackKit | None = None
        self.github: GitHubKit | None = None
        if config.slack is not None:
            from .slack_wiring import SlackKit

            self.slack = SlackKit(config.slack)
        if config.github is not None:
            from .github_wiring import GitHubKit

            self.github = GitHubKit(config.github, state_dir)
        self._store = store
        self.people = People.from_config(config.people)
        self._answer_queue: AnswerQueue | None = None

    def posting(self) -> dict[str, Channel]:
        channels: dict[str, Channel] = {"local": self.local}
        if self.slack is not None:
            channels["slack"] = self.slack.channel
        if self.github is not None:
            channels["github"] = self.github.channel
        return channels

    def authorizer(self) -> Authorizer:
        memberships: dict[str, Membership] = {"local": ListMembership("local")}
        if self.slack is not None:
            memberships["slack"] = self.slack.membership
        if self.github is not None:
            memberships["github"] = self.github.membership
        return Authorizer(memberships, self.people)

    def _github_answers(self, votes: VotePath, desk: ReviewDesk) -> AnswerQueue:
        """The queue GitHub's answers wait in between being recorded and cast: the webhook's and the poller's."""
        if self._answer_queue is None:
            from .answer_queue import AnswerQueue

            self._answer_queue = AnswerQueue(self._store, votes.handle_many, desk.finish_deliveries)
        return self._answer_queue

    def routes(self, votes: VotePath, desk: ReviewDesk) -> list[BaseRoute]:
        """``POST /slack/events`` and ``POST /github/webhook`` for the channels that take requests over HTTP."""
        routes: list[BaseRoute] = []
        if self.slack is not None:
            routes += self.slack.routes(votes)
        if self.github is not None:
            routes += self.github.routes(self._github_answers(votes, desk).accept_many)
        return routes

    def start(self, votes: VotePath, desk: ReviewDesk) -> None:
        """Socket Mode, GitHub polling and GitHub's answer queue (votes accepted before a restart first)."""
        if self.slack is not None:
            self.slack.start(votes)
        if self.github is not None:
            from .github_wiring import open_review_watches

            answers = self._github_answers(votes, desk)
            desk.outbox.yield_to("github", answers.busy)  # voters' answers wait out a burst of deliveries
            answers.start()
            self.github.start(answers.accept, lambda: open_review_watches(self._store))

    def stop(self) -> None:
        for kit in (self.slack, self.github):
            if kit is not None:
                kit.stop()
        if self._answer_queue is not None:
            self._answer_queue.stop()
