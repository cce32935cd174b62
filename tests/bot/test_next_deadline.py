"""``next_deadline`` agrees with ``due_actions`` on a grid of review shapes.

The store answers "what is due?" from ``next_deadline`` alone, so for every
shape: nothing is due one microsecond before it, something is due at it, and
a review without one never has anything due.
"""

from __future__ import annotations

import copy
import itertools
from datetime import datetime, timedelta, UTC

import pytest

from bot.review_deadlines import due_actions, next_deadline
from bot.review_records import Review, ReviewPolicy

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
H = timedelta(hours=1)
TICK = timedelta(microseconds=1)

AFTERS = [None, timedelta(0), 1 * H, 3 * H]
PAUSES = [None, T0 - H, T0 + 30 * timedelta(minutes=1), T0 + 2 * H, T0 + 100 * H]
FIRED = [None, T0 + timedelta(minutes=5)]
STATES = [("open", None), ("decided", None), ("open", T0 + H)]  # (status, timed_out_at)


def shapes() -> list[Review]:
    reviews = []
    grid = itertools.product(AFTERS, AFTERS, AFTERS, FIRED, FIRED, PAUSES, STATES)
    for remind, escalate, decide, reminded, escalated, paused, (status, timed_out) in grid:
        reviews.append(
            Review(
                id="triage-17",
                loop="triage",
                run_id="triage-run-3",
                checkpoint_id="checkpoint_0001",
                request={},
                policy=ReviewPolicy(remind_after=remind, escalate_after=escalate, decide_after=decide),
                created_at=T0,
                status=status,
                paused_until=paused,
                reminded_at=reminded,
                escalated_at=escalated,
                timed_out_at=timed_out,
            )
        )
    return reviews


def due(review: Review, now: datetime) -> list[str]:
    return due_actions(copy.deepcopy(review), now=now)  # due_actions marks what fired; keep the shape


def test_the_grid_covers_reviews_with_and_without_deadlines() -> None:
    deadlines = [next_deadline(r) for r in shapes()]
    assert any(d is None for d in deadlines) and any(d is not None for d in deadlines)
    assert any(d == T0 + 100 * H for d in deadlines)  # a pause pushes a deadline out


@pytest.mark.parametrize("review", shapes())
def test_next_deadline_is_when_due_actions_first_returns_something(review: Review) -> None:
    deadline = next_deadline(review)
    if deadline is None:
        for now in (T0 - H, T0, T0 + 5 * H, T0 + 1000 * H):
            assert due(review, now) == []
        return
    assert due(review, deadline - TICK) == []
    assert due(review, deadline) != []
    assert due(review, deadline + 200 * H) != []


def test_nothing_is_due_for_a_review_that_is_not_open_or_timed_out() -> None:
    review = shapes()[0]
    review.policy = ReviewPolicy(decide_after=H)
    assert next_deadline(review) == T0 + H
    review.timed_out_at = T0 + H
    assert next_deadline(review) is None
    review.timed_out_at, review.status = None, "applied"
    assert next_deadline(review) is None


def test_a_fired_reminder_leaves_the_next_pending_deadline() -> None:
    review = shapes()[0]
    review.policy = ReviewPolicy(remind_after=H, escalate_after=2 * H, decide_after=3 * H)
    assert next_deadline(review) == T0 + H
    assert due_actions(review, now=T0 + H) == ["remind"]
    assert next_deadline(review) == T0 + 2 * H
    assert due_actions(review, now=T0 + 2 * H) == ["escalate"]
    assert next_deadline(review) == T0 + 3 * H
