"""The GitHub channel: review comments with a hidden marker, votes from comments and labels.

- ``client``: the PyGithub calls loopbot makes, errors mapped to ``ChannelError``;
- ``render``: the review comment;
- ``channel``: ``GitHubChannel``, the ``Channel`` the bot posts through;
- ``events``: webhook payloads and polled items -> ``Reply``;
- ``webhook``: the ``POST /github/webhook`` Starlette route;
- ``poll``: ``Poller`` for installs without a public URL;
- ``directory``: permissions and team membership, cached;
- ``identity``: who loopbot itself is on GitHub (``BotIdentity``), learned before it posts.
"""

from __future__ import annotations

from .channel import AWAITING_LABEL, OUTCOME_LABELS, RUN_LABEL, ChannelAPI, GitHubChannel
from .client import Comment, GitHubClient, IssueInfo, JsonPage, make_client, make_github
from .directory import PERMISSION_LEVELS, Directory, DirectoryAPI, permission_at_least
from .identity import BotIdentity, Me
from .events import VOTE_LABELS, replies_from_comment, replies_from_event, reply_from_label
from .poll import MemoryPollState, PollAPI, Poller, PollReport, PollState, Watch
from .render import render_review
from .webhook import MAX_BODY_BYTES, sign, signature_ok, webhook_route

__all__ = [
    "AWAITING_LABEL",
    "BotIdentity",
    "ChannelAPI",
    "Comment",
    "Directory",
    "DirectoryAPI",
    "GitHubChannel",
    "GitHubClient",
    "IssueInfo",
    "JsonPage",
    "MAX_BODY_BYTES",
    "Me",
    "MemoryPollState",
    "OUTCOME_LABELS",
    "PERMISSION_LEVELS",
    "PollAPI",
    "PollReport",
    "PollState",
    "Poller",
    "RUN_LABEL",
    "VOTE_LABELS",
    "Watch",
    "make_client",
    "make_github",
    "permission_at_least",
    "render_review",
    "replies_from_comment",
    "replies_from_event",
    "reply_from_label",
    "sign",
    "signature_ok",
    "webhook_route",
]
