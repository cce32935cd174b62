"""What the desk hands every channel: the decision as data, and every GitHub user and team who may answer (#18)."""

from __future__ import annotations

from adapters.channel import PostOutcome
from bot.desk import review_post
from bot.review_records import Reviewers
from bot.reviews import cast_vote
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest

from ..test_reviews import T0, A, R, make_review, vote


def _request() -> dict[str, object]:
    return ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, timestamp=T0).to_dict()


def test_the_post_carries_the_outcome_as_data_whatever_its_reason_says() -> None:
    review = make_review()
    review.request = _request()
    assert review_post(review).outcome is None
    cast_vote(review, vote("github:bob", R, "not before APPROVE"), now=T0)
    assert review_post(review).outcome == PostOutcome("reject", ("github:bob",), "not before APPROVE", False)


def test_the_post_names_github_users_teams_and_the_permission_that_may_answer() -> None:
    review = make_review(reviewers=Reviewers(github_users=["alice"], github_teams=["octo/ops-team"],
                                             github_min_permission="write"))
    review.request = _request()
    post = review_post(review)
    assert post.reviewers["github"] == ("alice", "octo/ops-team") and post.min_permission == "write"
    cast_vote(review, vote("github:alice", A), now=T0)
    assert review_post(review).outcome == PostOutcome("approve", ("github:alice",), "", False)
