"""The review rules as tables with an explicit ``now``."""

from __future__ import annotations

from datetime import datetime, timedelta, UTC

import pytest

from bot.review_deadlines import decide_by_timeout, due_actions
from bot.review_voters import authorize
from bot.review_records import Outcome, Review, ReviewPolicy, ReviewPolicyError, Reviewers, Vote
from bot.reviews import cast_vote, cast_votes, mark_applied, mark_failed
from loop_engine.checkpoint import HumanDecision

T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
A, R, RT, M, P = (
    HumanDecision.APPROVE,
    HumanDecision.REJECT,
    HumanDecision.RETRY,
    HumanDecision.MODIFY,
    HumanDecision.PAUSE,
)


def make_review(**policy: object) -> Review:
    return Review(
        id="triage-17",
        loop="triage",
        run_id="triage-run-3",
        checkpoint_id="checkpoint_0001",
        request={"checkpoint_id": "checkpoint_0001"},
        policy=ReviewPolicy(**policy),  # type: ignore[arg-type]
        created_at=T0,
    )


def vote(voter: str, decision: HumanDecision, feedback: str = "", **kw: object) -> Vote:
    if decision is HumanDecision.MODIFY:
        kw.setdefault("modifications", CHANGE)
    return Vote(voter=voter, decision=decision, feedback=feedback, **kw)  # type: ignore[arg-type]


CHANGE = {"context": {"items": 2}}


# (policy, votes in order, expected accepted flags, expected final decision or None, decided_by)
TALLY = [
    ("one approve decides", {}, [("local:a", A, "")], [True], A, ["local:a"]),
    ("2 of M: one approve leaves it open", {"approvals_required": 2}, [("local:a", A, "")], [True], None, None),
    (
        "2 distinct approvals decide",
        {"approvals_required": 2},
        [("local:a", A, ""), ("local:b", A, "")],
        [True, True],
        A,
        ["local:a", "local:b"],
    ),
    (
        "same person twice counts once",
        {"approvals_required": 2},
        [("local:a", A, ""), ("local:a", A, "again")],
        [True, True],
        None,
        None,
    ),
    (
        "same person, other case, counts once",
        {"approvals_required": 2},
        [("local:alice", A, ""), ("local:ALICE", A, "")],
        [True, True],
        None,
        None,
    ),
    (
        "reject vetoes after an approval",
        {"approvals_required": 2},
        [("local:a", A, ""), ("local:b", R, "wrong labels")],
        [True, True],
        R,
        ["local:b"],
    ),
    ("reject needs a reason", {}, [("local:a", R, "  ")], [False], None, None),
    ("one retry decides when one person is required", {}, [("local:a", RT, "try again")], [True], RT, ["local:a"]),
    ("2 of M: one retry leaves it open", {"approvals_required": 2}, [("local:a", RT, "")], [True], None, None),
    (
        "2 of M: two retries decide",
        {"approvals_required": 2},
        [("local:a", RT, ""), ("local:b", RT, "")],
        [True, True],
        RT,
        ["local:a", "local:b"],
    ),
    ("2 of M: one modify leaves it open", {"approvals_required": 2}, [("local:a", M, "")], [True], None, None),
    (
        "2 of M: two modifies decide",
        {"approvals_required": 2},
        [("local:a", M, ""), ("local:b", M, "")],
        [True, True],
        M,
        ["local:a", "local:b"],
    ),
    (
        "2 of M: different decisions do not add up",
        {"approvals_required": 2},
        [("local:a", A, ""), ("local:b", RT, ""), ("local:c", M, "")],
        [True, True, True],
        None,
        None,
    ),
    (
        "2 of M: changing a vote moves the person to the other count",
        {"approvals_required": 2},
        [("local:a", RT, ""), ("local:b", A, ""), ("local:a", A, "")],
        [True, True, True],
        A,
        ["local:b", "local:a"],
    ),
    ("2 of M: one reject still vetoes", {"approvals_required": 2}, [("local:a", R, "no")], [True], R, ["local:a"]),
    (
        "a replaced vote no longer counts",
        {"approvals_required": 2},
        [("local:a", A, ""), ("local:a", P, "1h"), ("local:b", A, "")],
        [True, True, True],
        None,
        None,
    ),
    (
        "first outcome wins; later votes refused",
        {},
        [("local:a", A, ""), ("local:b", R, "too late")],
        [True, False],
        A,
        ["local:a"],
    ),
]


@pytest.mark.parametrize(
    ("name", "policy", "votes", "accepted", "decision", "decided_by"), TALLY, ids=[t[0] for t in TALLY]
)
def test_tally(name, policy, votes, accepted, decision, decided_by) -> None:
    review = make_review(**policy)
    results = [cast_vote(review, vote(v, d, f), now=T0 + timedelta(minutes=i)) for i, (v, d, f) in enumerate(votes)]
    assert [r.accepted for r in results] == accepted
    if decision is None:
        assert review.outcome is None and review.status == "open"
    else:
        assert review.outcome is not None and review.status == "decided"
        assert review.outcome.decision is decision
        assert review.outcome.decided_by == decided_by
        assert not review.outcome.timed_out


def test_the_deciding_vote_returns_the_outcome_and_only_it() -> None:
    review = make_review(approvals_required=2)
    first = cast_vote(review, vote("local:a", A), now=T0)
    assert first.outcome is None and "1 of 2" in first.message
    second = cast_vote(review, vote("local:b", A, "looks right"), now=T0 + timedelta(minutes=1))
    assert second.outcome is review.outcome
    assert second.outcome is not None and second.outcome.feedback == "local:b: looks right"


def test_late_vote_is_told_who_decided_and_when() -> None:
    review = make_review()
    cast_vote(review, vote("local:alice", R, "no"), now=T0)
    before = review.to_dict()
    late = cast_vote(review, vote("local:bob", A), now=T0 + timedelta(hours=1))
    assert not late.accepted
    assert f"already decided by local:alice at {T0.isoformat()}" in late.message
    assert review.to_dict() == before


def test_modify_carries_the_changes() -> None:
    review = make_review()
    result = cast_vote(review, vote("local:a", M, "smaller", modifications=CHANGE), now=T0)
    assert result.outcome is not None and result.outcome.modifications == CHANGE
    response = result.outcome.to_response("checkpoint_0001")
    assert response.decision is M and response.modifications == CHANGE
    assert response.reviewer == "local:a" and response.checkpoint_id == "checkpoint_0001"


def test_a_lone_retry_says_how_many_are_needed() -> None:
    result = cast_vote(make_review(approvals_required=3), vote("local:a", RT), now=T0)
    assert result.accepted and result.message == "retry from local:a recorded: 1 of 3 needed"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "at least one change"),
        ({"note": "x"}, "modify cannot change 'note'"),
        ({"note": "x"}, "e.g. context.note=VALUE"),
        ({"context": {"a": 1}, "items": 2}, "modify cannot change 'items'"),
        ({"context": "x"}, "context takes keys under it"),
    ],
)
def test_modify_changes_the_engine_cannot_make_are_refused_at_vote_time(changes, message) -> None:
    review = make_review()
    before = review.to_dict()
    result = cast_vote(review, vote("local:a", M, modifications=changes), now=T0)
    assert not result.accepted and message in result.message
    assert review.to_dict() == before


@pytest.mark.parametrize("decision", [A, R, RT])
def test_changes_on_a_decision_that_cannot_use_them_are_refused(decision) -> None:
    result = cast_vote(make_review(), vote("local:a", decision, "why", modifications=CHANGE), now=T0)
    assert not result.accepted and "takes no changes" in result.message and "use modify" in result.message


def test_pause_takes_no_change_but_until() -> None:
    result = cast_vote(make_review(), vote("local:a", P, modifications={"until": "2031-01-01T00:00Z", "x": 1}), now=T0)
    assert not result.accepted and "pause takes only until=TIME, not x" in result.message


AUTH = [
    ("anyone when nothing is configured", Reviewers(), "slack:U1", None, True),
    ("local name listed", Reviewers(local=["alice"]), "local:Alice", None, True),
    ("local name not listed", Reviewers(local=["alice"]), "local:bob", None, False),
    ("channel without a list refuses", Reviewers(local=["alice"]), "slack:U1", None, False),
    ("slack user listed", Reviewers(slack_users=["U1"]), "slack:U1", None, True),
    ("slack group member", Reviewers(slack_groups=["S1"]), "slack:U2", lambda v: v == "slack:U2", True),
    ("slack group without a check", Reviewers(slack_groups=["S1"]), "slack:U2", None, False),
    ("github login any case", Reviewers(github_users=["Alice"]), "github:alice", None, True),
    ("github permission check", Reviewers(github_min_permission="write"), "github:bob", lambda v: True, True),
    ("github check says no", Reviewers(github_teams=["o/t"]), "github:bob", lambda v: False, False),
    ("unqualified voter", Reviewers(), "alice", None, False),
]


@pytest.mark.parametrize(("name", "reviewers", "voter", "check", "allowed"), AUTH, ids=[a[0] for a in AUTH])
def test_authorize(name, reviewers, voter, check, allowed) -> None:
    assert (authorize(reviewers, voter, check) is None) is allowed


def test_unauthorised_vote_is_refused_with_the_reason_and_changes_nothing() -> None:
    review = make_review(reviewers=Reviewers(local=["alice"]))
    before = review.to_dict()
    result = cast_vote(review, vote("local:mallory", A), now=T0)
    assert not result.accepted
    assert "mallory is not a reviewer" in result.message and "alice" in result.message
    assert review.to_dict() == before


def test_timeout_voter_is_reserved() -> None:
    assert not cast_vote(make_review(), vote("timeout", A), now=T0).accepted


def test_duplicate_delivery_changes_nothing() -> None:
    review = make_review(approvals_required=2)
    assert cast_vote(review, vote("slack:U1", A, delivery_key="evt-1"), now=T0).accepted
    before = review.to_dict()
    again = cast_vote(review, vote("slack:U2", A, delivery_key="evt-1"), now=T0)
    assert (again.accepted, again.message) == (False, "duplicate delivery")
    assert review.to_dict() == before


def test_duplicate_delivery_after_the_outcome_is_still_a_duplicate() -> None:
    review = make_review()
    cast_vote(review, vote("slack:U1", A, delivery_key="evt-1"), now=T0)
    assert cast_vote(review, vote("slack:U1", A, delivery_key="evt-1"), now=T0).message == "duplicate delivery"


PAUSES = [
    ("duration in feedback", vote("local:a", P, "2h waiting on CI"), T0 + timedelta(hours=2)),
    ("free text -> default 24h", vote("local:a", P, "later please"), T0 + timedelta(hours=24)),
    ("no text -> default 24h", vote("local:a", P), T0 + timedelta(hours=24)),
    (
        "explicit until",
        vote("local:a", P, modifications={"until": (T0 + timedelta(days=3)).isoformat()}),
        T0 + timedelta(days=3),
    ),
    (
        "until as datetime",
        vote("local:a", P, modifications={"until": T0 + timedelta(hours=5)}),
        T0 + timedelta(hours=5),
    ),
]


@pytest.mark.parametrize(("name", "the_vote", "until"), PAUSES, ids=[p[0] for p in PAUSES])
def test_pause_sets_paused_until_and_keeps_the_review_open(name, the_vote, until) -> None:
    review = make_review()
    result = cast_vote(review, the_vote, now=T0)
    assert result.accepted and result.outcome is None
    assert review.status == "open" and review.paused_until == until
    Review.from_dict(review.to_dict())  # the stored vote stays JSON


@pytest.mark.parametrize("until", ["next tuesday", 5])
def test_bad_pause_until_is_refused(until) -> None:
    result = cast_vote(make_review(), vote("local:a", P, modifications={"until": until}), now=T0)
    assert not result.accepted and "not an ISO time" in result.message


@pytest.mark.parametrize("until", ["2031-01-01T00:00", datetime(2031, 1, 1)])
def test_pause_until_without_a_time_zone_is_refused_and_changes_nothing(until) -> None:
    review = make_review(**DEADLINES)
    before = review.to_dict()
    result = cast_vote(review, vote("local:a", P, modifications={"until": until}), now=T0)
    assert not result.accepted
    assert "has no time zone" in result.message and "2031-01-01T00:00" in result.message and "Z (UTC)" in result.message
    assert review.to_dict() == before
    assert due_actions(review, now=T0 + 3 * H) == ["remind"]


def test_pause_until_in_another_zone_compares_with_the_clock() -> None:
    review = make_review(**DEADLINES)
    assert cast_vote(review, vote("local:a", P, modifications={"until": "2025-01-06T12:00+01:00"}), now=T0).accepted
    # until 11:00 UTC; remind_after (2h) counts from the pause's end
    assert due_actions(review, now=T0 + 4 * H - timedelta(minutes=1)) == []
    assert due_actions(review, now=T0 + 4 * H) == ["remind"]


def test_a_stored_naive_pause_is_read_as_utc_and_does_not_break_deadlines() -> None:
    """Reviews written before pauses were checked may hold a naive time; the tick must not crash on them."""
    data = make_review(**DEADLINES).to_dict()
    data["paused_until"] = "2025-01-06T12:00:00"
    review = Review.from_dict(data)
    assert review.paused_until == datetime(2025, 1, 6, 12, 0, tzinfo=UTC)
    assert due_actions(review, now=T0 + H) == []
    assert due_actions(review, now=T0 + 3 * H + 2 * H) == ["remind"]


def test_mark_failed_records_the_error_and_ends_the_review() -> None:
    review = make_review()
    with pytest.raises(ValueError, match="no outcome"):
        mark_failed(review, "x")
    cast_vote(review, vote("local:a", M), now=T0)
    mark_failed(review, "the engine refused it")
    assert (review.status, review.error) == ("failed", "the engine refused it")
    assert Review.from_dict(review.to_dict()) == review
    assert due_actions(review, now=T0 + 100 * H) == []
    assert "already decided by local:a" in cast_vote(review, vote("local:b", A), now=T0 + H).message


H = timedelta(hours=1)
DEADLINES = {
    "remind_after": 2 * H,
    "escalate_after": 8 * H,
    "escalate_to": [{"slack": {"channel": "C0PAGER"}}],
    "decide_after": 24 * H,
}


@pytest.mark.parametrize(
    ("ticks", "expected"),
    [
        ([1 * H], [[]]),
        ([2 * H], [["remind"]]),
        ([2 * H, 3 * H], [["remind"], []]),
        ([9 * H], [["remind", "escalate"]]),
        ([2 * H, 8 * H, 9 * H], [["remind"], ["escalate"], []]),
        ([25 * H], [["decide"]]),
        ([2 * H, 24 * H], [["remind"], ["decide"]]),
    ],
)
def test_due_actions_fire_once_each(ticks, expected) -> None:
    review = make_review(**DEADLINES)
    assert [due_actions(review, now=T0 + t) for t in ticks] == expected


def test_pause_silences_deadlines_until_it_ends_and_restarts_the_clock() -> None:
    review = make_review(**DEADLINES)
    cast_vote(review, vote("local:a", P, "1d"), now=T0 + H)
    assert due_actions(review, now=T0 + 20 * H) == []
    assert due_actions(review, now=T0 + 25 * H) == []  # decide_after counts from the pause's end
    assert due_actions(review, now=T0 + 25 * H + 2 * H) == ["remind"]
    assert due_actions(review, now=T0 + 25 * H + 24 * H) == ["decide"]


def test_no_actions_once_decided() -> None:
    review = make_review(**DEADLINES)
    cast_vote(review, vote("local:a", A), now=T0)
    assert due_actions(review, now=T0 + 100 * H) == []


@pytest.mark.parametrize(
    ("default", "allow", "decision", "status"),
    [("reject", False, R, "decided"), ("approve", True, A, "decided"), ("pause", False, P, "open")],
)
def test_decide_by_timeout_applies_the_default_and_says_it_timed_out(default, allow, decision, status) -> None:
    review = make_review(decide_after=24 * H, default=default, allow_default_approve=allow)
    outcome = decide_by_timeout(review, now=T0 + 24 * H)
    assert outcome.decision is decision and outcome.timed_out
    assert outcome.decided_by == ["timeout"]
    assert "timed out after 1d" in outcome.feedback
    assert review.status == status and review.timed_out_at == T0 + 24 * H
    assert due_actions(review, now=T0 + 48 * H) == []
    response = outcome.to_response("checkpoint_0001")
    assert response.reviewer == "timeout" and "timed out" in response.feedback


def test_after_a_timeout_late_votes_name_the_timeout() -> None:
    review = make_review(decide_after=H)
    decide_by_timeout(review, now=T0 + H)
    late = cast_vote(review, vote("local:a", A), now=T0 + 2 * H)
    assert not late.accepted and "already decided by timeout" in late.message and "timed out" in late.message


def test_pause_default_keeps_the_review_decidable_by_a_person() -> None:
    review = make_review(decide_after=H, default="pause")
    decide_by_timeout(review, now=T0 + H)
    assert cast_vote(review, vote("local:a", A), now=T0 + 2 * H).outcome is not None


def test_decide_by_timeout_keeps_an_earlier_outcome() -> None:
    review = make_review(decide_after=H)
    cast_vote(review, vote("local:a", A), now=T0)
    assert decide_by_timeout(review, now=T0 + 2 * H).decided_by == ["local:a"]


def test_default_approve_needs_allow_default_approve() -> None:
    with pytest.raises(ReviewPolicyError, match="allow_default_approve"):
        ReviewPolicy(default="approve")
    policy = ReviewPolicy(default="approve", allow_default_approve=True)
    policy.allow_default_approve = False  # e.g. a hand-edited document
    review = make_review()
    review.policy = policy
    with pytest.raises(ReviewPolicyError):
        decide_by_timeout(review, now=T0)


@pytest.mark.parametrize("bad", [{"approvals_required": 0}, {"default": "maybe"}])
def test_bad_policies_are_refused(bad) -> None:
    with pytest.raises(ReviewPolicyError):
        ReviewPolicy(**bad)


def test_mark_applied() -> None:
    review = make_review()
    with pytest.raises(ValueError, match="no outcome"):
        mark_applied(review, now=T0)
    cast_vote(review, vote("local:a", A), now=T0)
    mark_applied(review, now=T0 + H)
    assert review.status == "applied" and review.applied_at == T0 + H
    assert not cast_vote(review, vote("local:b", A), now=T0 + 2 * H).accepted


def test_round_trip_keeps_everything() -> None:
    review = make_review(approvals_required=2, reviewers=Reviewers(local=["a", "b"]), **DEADLINES)
    cast_vote(review, vote("local:a", A, "ok", delivery_key="k1"), now=T0)
    cast_vote(review, vote("local:b", P, "2h"), now=T0)
    review.posts.append({"channel": "local", "data": {"path": "x.md"}})
    due_actions(review, now=T0 + 30 * H)
    data = review.to_dict()
    assert data["format"] == 1
    again = Review.from_dict(data)
    assert again.to_dict() == data and again == review


def test_newer_format_refused() -> None:
    data = make_review().to_dict()
    data["format"] = 99
    with pytest.raises(ValueError, match="format 99"):
        Review.from_dict(data)


def test_outcome_round_trip() -> None:
    outcome = Outcome(A, ["local:a"], T0, feedback="x")
    assert Outcome.from_dict(outcome.to_dict()) == outcome


def test_history_keeps_every_vote_and_survives_the_store_while_votes_keep_one_per_person() -> None:
    review = make_review(approvals_required=2)
    cast_vote(review, Vote("local:ann", HumanDecision.PAUSE, feedback="1h"), now=T0)
    cast_vote(review, Vote("local:ann", HumanDecision.APPROVE), now=T0 + timedelta(minutes=1))
    assert [v.decision for v in review.votes] == [HumanDecision.APPROVE]
    assert [(v.decision, v.at) for v in review.history] == [
        (HumanDecision.PAUSE, T0), (HumanDecision.APPROVE, T0 + timedelta(minutes=1))
    ]
    again = Review.from_dict(review.to_dict())
    assert [v.to_dict() for v in again.history] == [v.to_dict() for v in review.history]
    old = review.to_dict()
    del old["history"]  # stored before the history was kept: its current votes are all that is known
    assert [v.decision for v in Review.from_dict(old).history] == [HumanDecision.APPROVE]


def test_casting_on_a_review_without_its_history_and_with_only_its_own_keys_answers_and_appends_the_same() -> None:
    """What the store relies on to cast without reading the history (``cast_votes``'s doc)."""
    full = make_review(approvals_required=4)
    for n in range(2000):
        cast_vote(full, Vote(f"local:u{n % 2}", HumanDecision.APPROVE, delivery_key=f"k{n}"),
                  now=T0 + timedelta(seconds=n))
    at = T0 + timedelta(hours=1)
    casts: list[tuple[Vote, str | None]] = [
        (Vote("local:u1", HumanDecision.APPROVE, at=at, delivery_key="k7"), None),  # a redelivery
        (Vote("local:u9", HumanDecision.APPROVE, at=at, delivery_key="new"), None),
        (Vote("local:u8", HumanDecision.APPROVE, at=at, delivery_key="new"), None),  # the same delivery again
        (Vote("local:u7", HumanDecision.APPROVE, at=at, delivery_key="other"), "not a reviewer"),
    ]
    bare = Review.from_dict({**full.to_dict(), "history": [], "delivery_keys": ["k7"]})
    whole = [(r.kind, r.message) for r in cast_votes(full, casts)]
    assert [(r.kind, r.message) for r in cast_votes(bare, casts)] == whole
    assert [k for k, _ in whole] == ["duplicate", "counted", "duplicate", "refused"]
    assert full.history[2000:] == bare.history and [v.voter for v in bare.history] == ["local:u9"]
    assert full.delivery_keys[2000:] == bare.delivery_keys[1:] == ["new"]
    assert {**full.to_dict(), "history": [], "delivery_keys": []} == {**bare.to_dict(), "history": [],
                                                                       "delivery_keys": []}


def test_a_decision_ends_a_pause() -> None:
    review = make_review()
    cast_vote(review, Vote("local:ann", HumanDecision.PAUSE, feedback="2h"), now=T0)
    assert review.paused_until == T0 + timedelta(hours=2)
    cast_vote(review, Vote("local:bob", HumanDecision.APPROVE), now=T0 + timedelta(minutes=1))
    assert review.status == "decided" and review.paused_until is None
