"""``loopbot check``'s questions to Slack and GitHub: will the configured tokens really work?

Each line says what was checked and what was found, or exactly what is
wrong and how to fix it (a bad token, a missing scope, a channel the bot
has not joined, a repository it cannot read).
"""

from __future__ import annotations

from collections.abc import Iterator

from adapters.channel import ChannelError, Target

from bot.config import BotConfig

from .targets import targets_from

__all__ = ["check_connections"]


def _targets(config: BotConfig, kind: str) -> list[Target]:
    raw = [t for loop in config.loops for t in (*loop.review.post_to, *loop.review.timeout.escalate_to)]
    return [t for t in targets_from(raw) if t.kind == kind]


def check_connections(config: BotConfig) -> Iterator[tuple[str, bool]]:
    """(line, ok) for each configured channel."""
    if config.slack is not None:
        from .slack_wiring import SlackKit

        channels = [t.channel for t in _targets(config, "slack") if t.channel]
        try:
            yield f"slack: {SlackKit(config.slack).check(channels)}", True
        except ChannelError as err:
            yield f"slack: {err}", False
    if config.github is not None:
        from .github_wiring import GitHubKit

        repositories = sorted({t.repository for t in _targets(config, "github") if t.repository})
        try:
            yield f"github: {GitHubKit(config.github, config.state_dir).check(repositories)}", True
        except ChannelError as err:
            yield f"github: {err}", False
