"""Where does a review go? The neutral contract every channel implements.

The bot hands a channel a ``ReviewPost`` (what to show) and keeps the
``MessageRef`` it gets back (where it was shown) in the review, so that a
later update - the outcome, a reminder - lands on the same message and a
repost after a crash finds the first message instead of posting twice.
Channels never import ``bot``: everything they need is in these types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from loop_engine.checkpoint import ReviewRequest

__all__ = ["ReviewPost", "MessageRef", "Channel", "ChannelError"]


class ChannelError(Exception):
    """A channel could not deliver (a network error, a refused API call, an unwritable file)."""


@dataclass(frozen=True)
class ReviewPost:
    """What a channel shows for one review.

    Each channel words its own way to answer (a decide line, buttons, a slash
    command); ``reviewers_hint`` says who may answer and ``approvals_required``
    how many of them must agree, so nobody approves and waits unaware.
    """

    review_id: str
    loop: str
    run_id: str
    request: ReviewRequest
    reviewers_hint: str = ""
    approvals_required: int = 1


@dataclass(frozen=True)
class MessageRef:
    """A channel's handle on a message it posted; ``data`` must be JSON values."""

    channel: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MessageRef:
        try:
            channel, data = raw["channel"], raw["data"]
        except (KeyError, TypeError):
            raise ValueError(f"a message reference needs 'channel' and 'data', got {raw!r}") from None
        if not isinstance(channel, str) or not isinstance(data, dict):
            raise ValueError(f"a message reference needs a string 'channel' and a dict 'data', got {raw!r}")
        return cls(channel, dict(data))


@runtime_checkable
class Channel(Protocol):
    """One place reviews are posted to. Methods raise ChannelError when delivery fails."""

    @property
    def name(self) -> str:
        """The channel's kind, e.g. "local", "slack", "github"; equals ``MessageRef.channel``."""
        ...

    def post_request(self, post: ReviewPost) -> MessageRef:
        """Show the review; posting the same review again finds and reuses the first message."""
        ...

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        """Add ``text`` (an outcome, a reminder) to the message ``ref`` points at."""
        ...

    def post_escalation(self, post: ReviewPost, text: str) -> MessageRef:
        """Show the review to this channel's escalation target with ``text`` on top."""
        ...
