"""Vote rules found by a user audit: N-of-M modify agreement, pause times, replaced votes, empty reviewer lists.

Apart from test_reviews.py (the tally tables) to keep each file readable;
the helpers are shared.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from bot.desk import outcome_text, review_post
from bot.review_deadlines import due_actions
from bot.review_pause import MAX_PAUSE_AHEAD
from bot.review_records import Review, Reviewers
from bot.reviews import cast_vote
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest

from .test_reviews import DEADLINES, T0, A, H, M, P, RT, make_review, vote

# --- N-of-M modify: only identical changes agree ------------------------------------------------

ALICE = {"context": {"reason": "only two"}}
BOB = {"context": {"note": "bob"}}


def test_modify_votes_with_different_changes_do_not_add_up() -> None:
    review = make_review(approvals_required=2)
    assert cast_vote(review, vote("local:alice", M, modifications=ALICE), now=T0).accepted
    second = cast_vote(review, vote("local:bob", M, modifications=BOB), now=T0 + H)
    assert second.accepted and second.outcome is None and review.status == "open"
    assert second.message == (
        'modify from local:bob recorded: 1 of 2 needed for these changes: {"context": {"note": "bob"}}; '
        'local:alice proposed different changes: {"context": {"reason": "only two"}}'
    )
    assert [v.modifications for v in review.votes] == [ALICE, BOB]  # alice's vote is kept as she cast it


def test_modify_votes_with_the_same_changes_decide_and_say_which() -> None:
    review = make_review(approvals_required=2)
    first = cast_vote(review, vote("local:alice", M, modifications=ALICE), now=T0)
    assert first.message == (
        'modify from local:alice recorded: 1 of 2 needed for these changes: {"context": {"reason": "only two"}}'
    )
    cast_vote(review, vote("local:bob", M, modifications=BOB), now=T0 + H)
    third = cast_vote(review, vote("local:carol", M, modifications={"context": {"reason": "only two"}}), now=T0 + 2 * H)
    assert third.outcome is not None and third.outcome.modifications == ALICE
    assert third.outcome.decided_by == ["local:alice", "local:carol"]
    assert third.message == (
        'decided: modify by local:alice, local:carol with changes {"context": {"reason": "only two"}}'
    )
    stored = Review.from_dict(review.to_dict()).to_dict()
    assert stored["outcome"]["modifications"] == ALICE
    assert [v["modifications"] for v in stored["votes"]] == [ALICE, BOB, ALICE]


def test_json_values_that_python_calls_equal_are_different_changes() -> None:
    review = make_review(approvals_required=2)
    cast_vote(review, vote("local:alice", M, modifications={"context": {"flag": 1}}), now=T0)
    result = cast_vote(review, vote("local:bob", M, modifications={"context": {"flag": True}}), now=T0)
    assert result.outcome is None and "proposed different changes" in result.message


def test_a_person_changing_their_modify_moves_to_the_other_count() -> None:
    review = make_review(approvals_required=2)
    cast_vote(review, vote("local:alice", M, modifications=ALICE), now=T0)
    cast_vote(review, vote("local:bob", M, modifications=BOB), now=T0)
    result = cast_vote(review, vote("local:alice", M, modifications=BOB), now=T0 + H)
    assert result.outcome is not None and result.outcome.modifications == BOB
    assert result.message.endswith("; replaces your earlier modify")


# --- Pause times ----------------------------------------------------------------------------------


def refusal(until: object) -> str:
    review = make_review(**DEADLINES)
    before = review.to_dict()
    result = cast_vote(review, vote("local:a", P, modifications={"until": until}), now=T0)
    assert not result.accepted and review.to_dict() == before
    return result.message


def suggested(message: str) -> list[str]:
    """The times a message offers after "e.g.": "e.g. X (UTC) or Y" -> [X, Y]."""
    tail = message.split("e.g. ", 1)[1]
    return [word for word in tail.replace(" (UTC)", "").replace(" or ", " ").split()]


@pytest.mark.parametrize(
    ("until", "hints"),
    [
        ("2025-03-01", ["2025-03-01T00:00Z", "2025-03-01T00:00+01:00"]),
        ("2025-03-01+01:00", ["2025-03-01T00:00+01:00"]),
        ("2025-03-01Z", ["2025-03-01T00:00Z"]),
        ("2025-03-01z", ["2025-03-01T00:00Z"]),
        ("2025-03-01T09:30", ["2025-03-01T09:30Z", "2025-03-01T09:30+01:00"]),
        ("2025-03-01T09:30:15", ["2025-03-01T09:30:15Z", "2025-03-01T09:30:15+01:00"]),
        (datetime(2025, 3, 1), ["2025-03-01T00:00Z", "2025-03-01T00:00+01:00"]),
        ("next tuesday", ["2025-01-07T09:00+01:00"]),
    ],
)
def test_every_suggested_pause_time_is_accepted(until: object, hints: list[str]) -> None:
    message = refusal(until)
    assert suggested(message) == hints, message
    for hint in hints:  # the same parser and rules as the vote: each suggestion works as given
        review = make_review()
        assert cast_vote(review, vote("local:a", P, modifications={"until": hint}), now=T0).accepted, hint
        assert review.paused_until is not None and review.paused_until.tzinfo is not None


@pytest.mark.parametrize("until", [T0.isoformat(), "2025-01-06T08:59Z", "2024-12-31T00:00+01:00", T0 - H])
def test_pause_until_now_or_earlier_is_refused(until: object) -> None:
    message = refusal(until)
    assert "is in the past (it is now 2025-01-06T09:00+00:00)" in message and "pause 2h" in message


@pytest.mark.parametrize("until", ["", None])
def test_an_empty_pause_time_is_refused_not_taken_as_the_default(until: object) -> None:
    assert "is empty; give a time such as" in refusal(until)


def test_pause_until_more_than_ten_years_ahead_is_refused() -> None:
    assert "more than 10 years ahead" in refusal("9999-12-31T00:00Z")
    review = make_review(**DEADLINES)
    furthest = T0 + MAX_PAUSE_AHEAD
    assert cast_vote(review, vote("local:a", P, modifications={"until": furthest.isoformat()}), now=T0).accepted
    assert due_actions(review, now=furthest + 3 * H) == ["remind"]  # deadlines after it are still computable


@pytest.mark.parametrize("feedback", ["367d", "3000000d", "99999999999d"])
def test_a_pause_longer_than_the_cap_is_refused_not_taken_as_a_note(feedback: str) -> None:
    review = make_review(**DEADLINES)
    result = cast_vote(review, vote("local:a", P, feedback), now=T0)
    assert not result.accepted and "too long" in result.message and "366d" in result.message
    assert review.paused_until is None and review.votes == []


def test_the_longest_pause_leaves_deadlines_computable() -> None:
    review = make_review(**DEADLINES)
    assert cast_vote(review, vote("local:a", P, "366d"), now=T0).accepted
    assert review.paused_until == T0 + timedelta(days=366)
    assert due_actions(review, now=T0 + timedelta(days=366) + 2 * H) == ["remind"]


# --- A later vote says what it replaced -------------------------------------------------------------


def test_a_pause_says_it_replaces_an_earlier_approve() -> None:
    review = make_review(approvals_required=2)
    cast_vote(review, vote("local:alice", A), now=T0)
    result = cast_vote(review, vote("local:alice", P, "2h"), now=T0 + H)
    assert result.accepted and result.message.endswith("; replaces your earlier approve")
    assert review.approvals == []


@pytest.mark.parametrize(
    ("earlier", "later", "note"),
    [
        (vote("local:a", RT), vote("local:a", A), "; replaces your earlier retry"),
        (vote("local:a", P, "1h"), vote("local:a", P, "2h"), "; replaces your earlier pause"),
        (vote("local:a", A), vote("local:a", A, "still fine"), ""),
        (vote("local:b", A), vote("local:a", A), ""),
    ],
)
def test_replacement_notes(earlier, later, note) -> None:
    review = make_review(approvals_required=3)
    cast_vote(review, earlier, now=T0)
    message = cast_vote(review, later, now=T0 + H).message
    assert message.endswith(note) and message.count("replaces") == (1 if note else 0)


# --- Reviewer lists: omitted means anyone, empty means nobody -----------------------------------------


def test_an_empty_local_list_refuses_every_local_vote_and_names_the_key() -> None:
    review = make_review(reviewers=Reviewers(local=[]))
    before = review.to_dict()
    result = cast_vote(review, vote("local:alice", A), now=T0)
    assert not result.accepted and "review.reviewers.local is empty" in result.message
    assert review.to_dict() == before
    assert not Reviewers(local=[]).anyone
    assert Review.from_dict(review.to_dict()).policy.reviewers.local == []


@pytest.mark.parametrize("voter", ["local:alice", "slack:U1", "github:octocat"])
def test_omitted_reviewers_let_anyone_vote(voter: str) -> None:
    assert cast_vote(make_review(reviewers=Reviewers()), vote(voter, A), now=T0).accepted



def test_the_posted_review_carries_how_many_approvals_it_needs() -> None:
    review = make_review(approvals_required=2, reviewers=Reviewers(local=["alice", "bob"]))
    review.request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, timestamp=T0).to_dict()
    post = review_post(review)
    assert (post.reviewers_hint, post.approvals_required) == ("alice, bob", 2)


def test_the_posted_review_names_the_slack_user_groups_that_may_answer() -> None:
    review = make_review(reviewers=Reviewers(slack_users=["U0AAA"], slack_groups=["S0OPS"]))
    review.request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, timestamp=T0).to_dict()
    assert review_post(review).reviewers["slack"] == ("U0AAA", "S0OPS")


def test_the_outcome_text_shows_the_changes_a_modify_applies() -> None:
    review = make_review()
    cast_vote(review, vote("local:alice", M, "smaller", modifications=ALICE), now=T0)
    assert outcome_text(review) == (
        'Decided: MODIFY by local:alice at 2025-01-06T09:00:00+00:00 with changes {"context": {"reason": "only two"}}'
        " - local:alice: smaller"
    )
