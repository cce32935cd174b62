"""Recording channels for the desk's tests: one that fails on demand, one that blocks until released."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.channel import Answer, ChannelError, MessageRef, ReviewPost, Target
from bot.review_records import Review, ReviewPolicy, Reviewers
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest

from ..runtime_support import T0


@dataclass
class FlakyChannel:
    """Fails the next ``failures`` calls (with ``retry_after``), then records what it delivers."""

    name: str
    failures: int = 0
    retry_after: float | None = None
    delivered: list[tuple[str, str, str]] = field(default_factory=list)
    attempts: int = 0

    def _maybe_fail(self) -> None:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            raise ChannelError(f"{self.name} is down", retry_after=self.retry_after)

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        self._maybe_fail()
        self.delivered.append(("post", post.review_id, target.key))
        return MessageRef(self.name, {"review_id": post.review_id, "where": target.key})

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        self._maybe_fail()
        self.delivered.append(("update", post.review_id, f"{ref.target}: {text}"))

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        self._maybe_fail()
        self.delivered.append(("escalate", post.review_id, target.key))
        return MessageRef(self.name, {"review_id": post.review_id, "escalated_to": target.key})

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        self._maybe_fail()
        self.delivered.append(("answer", answer.review_id or "", answer.text))


class StuckChannel(FlakyChannel):
    """Every call blocks until ``release`` is set: a channel whose API hangs."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.release = threading.Event()
        self.entered = threading.Event()

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        self.entered.set()
        self.release.wait(30)
        return super().post_request(target, post)


def make_review(review_id: str = "demo-1", *, created_at: datetime = T0, **reviewers: Any) -> Review:
    return Review(
        id=review_id, loop="demo", run_id="demo-run-1", checkpoint_id="checkpoint_0001",
        request=ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST,
                              proposed_action="apply labels", timestamp=T0).to_dict(),
        policy=ReviewPolicy(reviewers=Reviewers(**reviewers)), created_at=created_at,
    )
