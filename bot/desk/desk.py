"""The review desk's outbound side: what each target of a review is told, as outbox tasks.

``open`` posts a review to every target (the local channel always, then the
loop's ``post_to``), ``update`` tells every message of the review (reminders,
the outcome, the run's end), ``escalate`` posts it to the escalation targets
too. Nothing here talks to a channel: each becomes a durable task (see
``outbox``) with an id that names its intent, so asking twice adds it once.
With ``inline=True`` (a foreground ``loopbot run``, tests) the tasks are also
attempted at once in the caller's thread; failures stay for ``serve``.
"""

from __future__ import annotations

import hashlib
import logging
from functools import partial
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from adapters.channel import Answer, Channel, PostOutcome, Reply, ReviewPost, Target
from loop_engine.review import ReviewRequest  # not .checkpoint: that loads the state types

from bot.review_records import Review
from bot.reviews import changes_text
from bot.store.base import OutboxTask, Store

from .outbox import ESCALATION_PREFIX, DeliveryThread, Outbox
from .targets import LOCAL, task_slug, targets_from

__all__ = ["ReviewDesk", "review_post", "outcome_text"]

log = logging.getLogger(__name__)

#: Which reviewer keys list each channel's own ids, for ``ReviewPost.reviewers`` (Slack: users U…, groups S…).
_CHANNEL_IDS = {"local": ("local",), "slack": ("slack_users", "slack_groups"), "github": ("github_users",)}


def review_post(review: Review, page_url: Callable[[str], str] | None = None) -> ReviewPost:
    """The neutral view of a review that every channel renders; ``page_url`` links its web page (``bot.web``)."""
    who = review.policy.reviewers
    reviewers = {
        channel: tuple(name for key in keys for name in getattr(who, key) or [])
        for channel, keys in _CHANNEL_IDS.items()
    }
    reviewers["github"] += tuple(who.github_teams or ())  # "org/team": GitHub tells a team from a user by its "/"
    hint = [*(who.people or []), *(who.local or [])]
    return ReviewPost(
        review_id=review.id,
        loop=review.loop,
        run_id=review.run_id,
        request=ReviewRequest.from_dict(review.request),
        reviewers_hint=", ".join(dict.fromkeys(hint)),
        approvals_required=review.policy.approvals_required,
        reviewers={channel: names for channel, names in reviewers.items() if names},
        restricted=not who.anyone,
        status=review.status,
        outcome=_post_outcome(review),
        min_permission=who.github_min_permission or "",
        page_url=None if page_url is None else page_url(review.id),
    )


def _post_outcome(review: Review) -> PostOutcome | None:
    outcome = review.outcome
    if outcome is None:
        return None
    return PostOutcome(outcome.decision.name.lower(), tuple(outcome.decided_by), outcome.feedback, outcome.timed_out)


def outcome_text(review: Review) -> str:
    """'Decided: APPROVE by local:alice at T' - or says plainly that it timed out; a MODIFY shows its changes."""
    outcome = review.outcome
    if review.status == "cancelled":  # closed by `cancel`: who and why, in place of a decision
        why = review.error or "cancelled"
        return why[:1].upper() + why[1:]
    if outcome is None:
        return "Undecided"
    when = outcome.decided_at.isoformat(timespec="seconds")
    if outcome.timed_out:
        return f"Timed out: {outcome.decision.name} (default) at {when}. {outcome.feedback}".strip()
    who = ", ".join(outcome.decided_by)
    changes = f" with changes {changes_text(outcome.modifications)}" if outcome.modifications else ""
    note = f" - {outcome.feedback}" if outcome.feedback else ""
    return f"Decided: {outcome.decision.name} by {who} at {when}{changes}{note}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _entry(target: Target, role: str) -> dict[str, Any]:
    key = target.key if role == "post" else ESCALATION_PREFIX + target.key
    return {"key": key, "target": target.to_dict(), "role": role}


class ReviewDesk:
    """Turns "post / update / escalate this review" into outbox tasks, and runs the channels' delivery threads."""

    def __init__(
        self,
        store: Store,
        channels: Mapping[str, Channel],
        *,
        clock: Callable[[], datetime],
        inline: bool = False,
        page_url: Callable[[str], str] | None = None,
    ) -> None:
        """``page_url(review_id)``: the signed link each message carries when pages are on."""
        if "local" not in channels:
            raise ValueError("the local channel is always on: pass channels={'local': LocalChannel(...)}")
        self._store = store
        self._clock = clock
        self._inline = inline
        self.outbox = Outbox(store, channels, partial(review_post, page_url=page_url), clock=clock)
        self._delivery: list[DeliveryThread] = []

    # -- delivery threads ----------------------------------------------------------

    def start(self) -> None:
        """One delivery thread per channel (serve); without it tasks wait, or go inline."""
        self._delivery = [DeliveryThread(self.outbox, name) for name in self.outbox.channels]
        for thread in self._delivery:
            thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        for thread in self._delivery:
            thread.stop(timeout)

    def problem(self) -> str | None:
        dead = [t for t in self._delivery if not t.alive]
        return f"{len(dead)} outbox delivery thread(s) stopped" if dead else None

    def flush(self) -> None:
        """Attempt every due task once in this thread (a foreground run before it exits)."""
        for name in self.outbox.channels:
            self.outbox.deliver_due(name)

    def _add(self, tasks: Iterable[OutboxTask]) -> None:
        channels = set()
        for task in tasks:
            self.outbox.add(task)
            channels.add(task.channel)
        self._added(channels)

    def _added(self, channels: set[str]) -> None:
        """Tasks of ``channels`` were stored: deliver them now when inline (the workers were woken)."""
        if self._inline:
            for name in channels & set(self.outbox.channels):
                self.outbox.deliver_due(name)

    def _task(self, review: Review, action: str, channel: str, key: str, payload: dict[str, Any]) -> OutboxTask:
        extra = f".{_digest(payload['text'])}" if action == "update" else ""
        return OutboxTask(
            id=f"{review.id}.{action}.{task_slug(key)}{extra}",
            channel=channel, action=action, review_id=review.id, payload=payload, created_at=self._clock(),
        )

    # -- what reviews ask for ------------------------------------------------------

    def _reachable(self, review: Review, targets: list[Target], what: str) -> list[Target]:
        """``targets`` this bot has a channel for; the others are said in the log and go to the local channel."""
        chosen: list[Target] = []
        for target in targets:
            if target.kind in self.outbox.channels:
                chosen.append(target)
                continue
            log.warning("review %s: %s target %s needs the %s channel, which this bot is not running; "
                        "it goes to the local channel instead", review.id, what, target.key, target.kind)
            chosen.append(LOCAL)
        return targets_from(t.to_dict() for t in chosen)

    def open(self, review: Review, targets: Iterable[Any]) -> None:
        """Post ``review`` to the local channel and each of ``targets`` (config or stored shapes), once each."""
        chosen = self._reachable(review, targets_from([LOCAL.to_dict(), *targets]), "post_to")
        posted = {p.get("target") or p.get("channel") for p in review.posts}
        # Tasks first, then the targets: a review whose targets are recorded has its posts queued
        # (the runner's restart relies on it), and a crash between only repeats an idempotent add.
        self._add(
            self._task(review, "post", target.kind, target.key, {"target": target.to_dict()})
            for target in chosen
            if target.key not in posted
        )
        self._remember(review, [_entry(target, "post") for target in chosen])

    def update(self, review: Review, text: str) -> None:
        """Tell every message of the review (its posts and escalations) ``text``."""
        current = self._store.get_review(review.id)
        tasks = []
        for entry in current.targets or [_entry(LOCAL, "post")]:
            kind = Target.from_dict(entry["target"]).kind
            tasks.append(self._task(current, "update", kind, entry["key"], {"target": entry["key"], "text": text}))
        self._add(tasks)

    def escalate(self, review: Review, targets: Iterable[Any], text: str) -> None:
        """Post the review to the escalation targets (the local channel if none) with ``text`` on top."""
        chosen = self._reachable(review, targets_from(targets) or [LOCAL], "escalate_to")
        self._add(
            self._task(review, "escalate", target.kind, target.key, {"target": target.to_dict(), "text": text})
            for target in chosen
        )
        self._remember(review, [_entry(target, "escalation") for target in chosen])
        log.warning("%s (escalated to %s)", text, ", ".join(t.key for t in chosen))

    def finish_deliveries(self, keys: Sequence[str], answers: Sequence[tuple[Reply, Answer]]) -> None:
        """Mark the deliveries ``keys`` done and queue their voters' answers (GitHub: a reply comment), one write.

        Answered together with the finishing, so a crash leaves either both
        (the answers go out) or neither (the votes are cast again, answered
        as duplicates of themselves, once). Slack answers in its ack instead.
        """
        now = self._clock()
        tasks = []
        for reply, answer in answers:
            if not reply.respond:
                continue
            key = reply.dedupe_key or f"{reply.voter.qualified}.{now.isoformat()}"
            tasks.append(OutboxTask(
                id=f"answer.{reply.voter.channel}.{_digest(key)}", channel=reply.voter.channel, action="answer",
                review_id=answer.review_id, created_at=now,
                payload={"respond": dict(reply.respond),
                         "answer": {"kind": answer.kind.value, "text": answer.text}},
            ))
        self._store.finish_deliveries(keys, tasks)
        channels = {task.channel for task in tasks}
        for channel in channels:
            self.outbox.wake(channel)
        self._added(channels)

    def _remember(self, review: Review, entries: list[dict[str, Any]]) -> None:
        """Add ``entries`` to the review's stored targets (status shows each, delivered or not)."""
        if {entry["key"] for entry in entries} <= {entry["key"] for entry in review.targets}:
            return  # known already: no write, no lock

        def record(stored: Review) -> None:
            known = {entry["key"] for entry in stored.targets}
            stored.targets.extend(entry for entry in entries if entry["key"] not in known)

        self._store.update_review(review.id, record)
