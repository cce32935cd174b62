"""Where a review is told: the loop's channels, for requests, outcomes, reminders, escalations.

The local channel is always on; Slack and GitHub channels plug in here (a
``Channel`` per name in ``channels``) once they are built - a target naming
a channel that is not configured is logged, never silently dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.channel import Channel, ChannelError, MessageRef, ReviewPost
from adapters.local import LocalChannel
from loop_engine.checkpoint import ReviewRequest

from bot.reviews import Review, changes_text

__all__ = ["ReviewDesk", "review_post", "outcome_text", "local_channel", "LOCAL_REVIEWS_DIR"]

log = logging.getLogger(__name__)

#: Where the local channel writes ``<review id>.md`` under ``state_dir`` (the store keeps its own JSON apart).
LOCAL_REVIEWS_DIR = "local-reviews"


def local_channel(state_dir: Path, decide_command: str = "loopbot decide") -> LocalChannel:
    """The always-on channel of a bot on ``state_dir``; serve and `run` must agree on its folder."""
    return LocalChannel(Path(state_dir) / LOCAL_REVIEWS_DIR, decide_command=decide_command)


def review_post(review: Review) -> ReviewPost:
    """The neutral view of a review that every channel renders."""
    local = review.policy.reviewers.local
    return ReviewPost(
        review_id=review.id,
        loop=review.loop,
        run_id=review.run_id,
        request=ReviewRequest.from_dict(review.request),
        reviewers_hint=(", ".join(local) if local else ""),
        approvals_required=review.policy.approvals_required,
    )


def outcome_text(review: Review) -> str:
    """'Decided: APPROVE by local:alice at T' - or says plainly that it timed out; a MODIFY shows its changes."""
    outcome = review.outcome
    if outcome is None:
        return "Undecided"
    when = outcome.decided_at.isoformat(timespec="seconds")
    if outcome.timed_out:
        return f"Timed out: {outcome.decision.name} (default) at {when}. {outcome.feedback}".strip()
    who = ", ".join(outcome.decided_by)
    changes = f" with changes {changes_text(outcome.modifications)}" if outcome.modifications else ""
    note = f" - {outcome.feedback}" if outcome.feedback else ""
    return f"Decided: {outcome.decision.name} by {who} at {when}{changes}{note}"


def _target_names(targets: list[Any]) -> list[str]:
    names: list[str] = []
    for target in targets or []:
        data = target if isinstance(target, Mapping) else target.model_dump(exclude_none=True)
        names.extend(str(key) for key, value in data.items() if value is not None)
    return names


class ReviewDesk:
    """Posts reviews to channels and records the message references it gets back."""

    def __init__(self, channels: Mapping[str, Channel]) -> None:
        if "local" not in channels:
            raise ValueError("the local channel is always on: pass channels={'local': LocalChannel(...)}")
        self._channels = dict(channels)

    def _channels_for(self, targets: list[Any]) -> list[Channel]:
        chosen = [self._channels["local"]]
        for name in _target_names(targets):
            channel = self._channels.get(name)
            if channel is None:
                log.warning("review target %r is not configured in this bot; only posting locally", name)
            elif channel not in chosen:
                chosen.append(channel)
        return chosen

    def post(self, review: Review, targets: list[Any]) -> list[dict[str, Any]]:
        """Post to every target (idempotent per channel) and return the refs to store."""
        post = review_post(review)
        done = {ref["channel"] for ref in review.posts}
        refs = list(review.posts)
        for channel in self._channels_for(targets):
            if channel.name in done:
                continue
            try:
                refs.append(channel.post_request(post).to_dict())
            except ChannelError as err:
                log.error("could not post review %s to %s: %s (will retry at restart)", review.id, channel.name, err)
        return refs

    def update(self, review: Review, text: str) -> None:
        """Tell every place the review was posted (outcome, reminder)."""
        post = review_post(review)
        for data in review.posts:
            ref = MessageRef.from_dict(data)
            channel = self._channels.get(ref.channel)
            if channel is None:
                log.warning("review %s was posted to %s, which is not configured now", review.id, ref.channel)
                continue
            try:
                channel.post_update(ref, post, text)
            except ChannelError as err:
                log.error("could not update review %s on %s: %s", review.id, ref.channel, err)

    def escalate(self, review: Review, targets: list[Any], text: str) -> list[dict[str, Any]]:
        """Post the review to the escalation targets as well (local: a log line and a file)."""
        post = review_post(review)
        refs: list[dict[str, Any]] = []
        names = _target_names(targets) or ["local"]
        for name in dict.fromkeys(["local", *names]):
            channel = self._channels.get(name)
            if channel is None:
                log.warning("escalation target %r of review %s is not configured; escalated locally", name, review.id)
                continue
            try:
                refs.append(channel.post_escalation(post, text).to_dict())
            except ChannelError as err:
                log.error("could not escalate review %s to %s: %s", review.id, name, err)
        log.warning("%s (posted to %d target(s))", text, len(refs))
        return refs
