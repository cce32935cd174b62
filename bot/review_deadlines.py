"""What is due on a review, and when? Reminders, escalation and the default decision, as pure rules.

Deadlines count from the review's creation, or from the end of its last
pause; a remind or escalate fires once; when nobody decides in time the
policy default decides, marked as timed out. Like the vote rules, these take
``now`` and mutate the ``Review`` they are given, so the store runs them
inside one locked read-modify-write and the tick posts only what was saved.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from adapters.durations import format_duration
from loop_engine.review import HumanDecision

from .review_records import TIMEOUT_VOTER, Outcome, Review, ReviewPolicyError

__all__ = ["due_actions", "next_deadline", "decide_by_timeout"]


def _is_quiet(review: Review, now: datetime) -> bool:
    paused = review.paused_until is not None and now < review.paused_until
    return review.status != "open" or paused or review.timed_out_at is not None


def _clock_start(review: Review) -> datetime:
    """Deadlines count from the review's creation, or from the end of its last pause."""
    if review.paused_until is not None and review.paused_until > review.created_at:
        return review.paused_until
    return review.created_at


def due_actions(review: Review, *, now: datetime) -> list[str]:
    """The deadline actions due now, marking remind/escalate as fired so each fires once.

    Call it inside ``store.update_review`` so the marks are saved before
    anything is posted. When the decide deadline has passed only "decide" is
    returned (a reminder right before the default outcome is noise); apply it
    with ``decide_by_timeout``.
    """
    if _is_quiet(review, now):
        return []
    policy = review.policy
    start = _clock_start(review)
    if policy.decide_after is not None and now >= start + policy.decide_after:
        return ["decide"]
    actions: list[str] = []
    if policy.remind_after is not None and review.reminded_at is None and now >= start + policy.remind_after:
        review.reminded_at = now
        actions.append("remind")
    if policy.escalate_after is not None and review.escalated_at is None and now >= start + policy.escalate_after:
        review.escalated_at = now
        actions.append("escalate")
    return actions


def next_deadline(review: Review) -> datetime | None:
    """The first instant at which ``due_actions(review, now=...)`` returns something, or None if never.

    The store keeps this per open review so a tick asks "what is due?" in
    time that grows with the due reviews, not with every review stored.
    Same rules as ``due_actions``: nothing for a quiet review (not open,
    timed out), deadlines count from ``_clock_start``, a fired remind or
    escalate is not pending again, and nothing is due before a pause ends.
    """
    if review.status != "open" or review.timed_out_at is not None:
        return None
    policy = review.policy
    start = _clock_start(review)
    pending = [policy.decide_after]
    if review.reminded_at is None:
        pending.append(policy.remind_after)
    if review.escalated_at is None:
        pending.append(policy.escalate_after)
    deadlines = []
    for after in pending:
        if after is not None:
            with contextlib.suppress(OverflowError):  # past year 9999: never due
                deadlines.append(start + after)
    if not deadlines:
        return None
    first = min(deadlines)
    if review.paused_until is not None and first < review.paused_until:
        return review.paused_until  # _is_quiet until the pause ends
    return first


def decide_by_timeout(review: Review, *, now: datetime) -> Outcome:
    """Apply the policy default because nobody decided in time.

    reject/approve record a timed-out outcome (status "decided"); pause keeps
    the review open but quiet (``timed_out_at``) so a person can still decide
    - apply an outcome only when ``review.status == "decided"``. A review
    that already has an outcome keeps it: the first outcome wins.
    """
    if review.outcome is not None:
        return review.outcome
    policy = review.policy
    if policy.default == "approve" and not policy.allow_default_approve:
        raise ReviewPolicyError(
            "timeout default 'approve' needs allow_default_approve: true in the loop's review.timeout"
        )
    waited = format_duration(policy.decide_after) if policy.decide_after is not None else "the deadline"
    decision = HumanDecision[policy.default.upper()]
    if decision is HumanDecision.PAUSE:
        what = "default pause: the run keeps waiting for a person"
    else:
        what = f"default outcome {policy.default} applied (no person decided)"
    outcome = Outcome(
        decision, [TIMEOUT_VOTER], now, timed_out=True, feedback=f"timed out after {waited} with no decision; {what}"
    )
    review.timed_out_at = now
    if decision is not HumanDecision.PAUSE:
        review.outcome = outcome
        review.status = "decided"
        review.paused_until = None
    return outcome
