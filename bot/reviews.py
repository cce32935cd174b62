"""How votes become a decision: the pure rules of a review.

Nothing here reads the clock, touches a file or talks to a channel: every
function takes ``now`` and mutates the ``Review`` it is given, so the rules
are plain table tests and the store can run them inside one locked
read-modify-write (``store.update_review(id, lambda r: cast_vote(r, v, now=now))``).

Rules (told to people in docs/commands.md, "Answering a review"): only REJECT (a veto) and PAUSE act on one vote;
APPROVE, RETRY and MODIFY each need ``approvals_required`` distinct people
voting that same decision - for MODIFY, with the very same changes, so no
one's changes are dropped for someone else's. One vote per person, replaced
while the review is open (the reply says what it replaced); the first
outcome wins. A vote carries only changes its decision can use (MODIFY: the
engine's keys; PAUSE: ``until``), so an outcome never fails when the run
resumes for a reason the voter could have been told.

The records it works on live in ``bot.review_records``; who may vote (``bot.review_voters``),
how long a pause lasts (``bot.review_pause``) and what falls due when
(``bot.review_deadlines``) are the neighbouring rules, each in its module.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from loop_engine.review import HumanDecision

from .review_pause import pause_until
from .review_records import TIMEOUT_VOTER, MembershipCheck, Outcome, Review, Vote
from .review_voters import Authorize, authorize

__all__ = [
    "VoteResult",
    "agreement",
    "agreements_needed",
    "COUNTED",
    "DECIDED",
    "REFUSED",
    "DUPLICATE",
    "ALREADY_DECIDED",
    "cast_vote",
    "cast_votes",
    "record_vote",
    "Cast",
    "changes_problem",
    "changes_text",
    "mark_applied",
    "mark_failed",
]

#: Decisions that take effect on one person's vote; the others need ``approvals_required`` people.
SINGLE_VOTE = (HumanDecision.REJECT, HumanDecision.PAUSE)

#: Why a vote was or was not recorded (``VoteResult.kind``): each answer a voter can get.
COUNTED, DECIDED, REFUSED, DUPLICATE, ALREADY_DECIDED = "counted", "decided", "refused", "duplicate", "already_decided"


@dataclass
class VoteResult:
    """What to tell the voter; ``outcome`` is set only when this vote decided the review."""

    accepted: bool
    message: str
    outcome: Outcome | None = None
    kind: str = COUNTED


def _already_decided(review: Review) -> str:
    outcome = review.outcome
    assert outcome is not None
    how = "timed out, " if outcome.timed_out else ""
    return f"already decided by {outcome.by} at {outcome.decided_at.isoformat()} ({how}{outcome.decision.name.lower()})"


def changes_problem(decision: HumanDecision, changes: dict[str, Any]) -> str | None:
    """Why ``changes`` cannot go with ``decision`` (only modify and pause take any), else None."""
    return _changes_problem(Vote("", decision, modifications=changes))


def _changes_problem(vote: Vote) -> str | None:
    """Why the vote's changes cannot be used by its decision, else None."""
    decision, changes = vote.decision, vote.modifications
    if decision is HumanDecision.MODIFY:
        from adapters.modify_changes import modification_problem  # here: the grammar is for votes, not listing

        return modification_problem(changes)
    allowed = {"until"} if decision is HumanDecision.PAUSE else set()
    extra = sorted(set(changes) - allowed)
    if not extra:
        return None
    takes = "only until=TIME" if allowed else "no changes"
    return f"{decision.name.lower()} takes {takes}, not {', '.join(extra)}; use modify to change the run"


def _check(review: Review, vote: Vote, allowed: Authorize) -> tuple[str, str] | None:
    """(kind, why) when ``vote`` is refused, else None; refusals change nothing."""
    if vote.delivery_key is not None and vote.delivery_key in review.delivery_keys:
        return DUPLICATE, "duplicate delivery"
    if review.outcome is not None:
        return ALREADY_DECIDED, _already_decided(review)
    if review.status == "cancelled":  # closed by `cancel`, not by a vote: nothing left to decide
        return ALREADY_DECIDED, f"review {review.id} is closed: its run was {review.error or 'cancelled'}"
    if vote.voter == TIMEOUT_VOTER:
        return REFUSED, "the timeout voter is reserved for deadlines; vote as a person"
    reason = allowed(review.policy.reviewers, vote.voter)
    if reason is not None:
        return REFUSED, f"vote refused: {reason}"
    if vote.decision is HumanDecision.REJECT and not vote.feedback.strip():
        return REFUSED, "a reject needs a reason, e.g. `reject the labels are wrong`"
    problem = _changes_problem(vote)
    return None if problem is None else (REFUSED, problem)


def cast_vote(
    review: Review,
    vote: Vote,
    *,
    now: datetime,
    is_member: MembershipCheck | None = None,
    authorize_with: Authorize | None = None,
) -> VoteResult:
    """Record ``vote`` on ``review`` (mutating it) when the rules allow, and say what happened.

    ``authorize_with`` replaces the built-in per-channel lists (the desk
    passes its channels' memberships and ``people:``); the default is
    ``authorize`` with ``is_member``.
    """
    allowed = authorize_with or (lambda reviewers, voter: authorize(reviewers, voter, is_member))
    refused = _check(review, vote, allowed)
    if refused is not None:
        kind, why = refused
        return VoteResult(False, why, kind=kind)
    if vote.decision is HumanDecision.PAUSE:
        try:
            until = pause_until(vote, now)
        except ValueError as err:
            return VoteResult(False, str(err), kind=REFUSED)
        paused = replace(vote, modifications={**vote.modifications, "until": until.isoformat()})
        replaced = record_vote(review, paused, now)
        review.paused_until = until
        quiet = "no reminders or default decision until then; the review stays open"
        return VoteResult(True, f"paused until {until.isoformat()}: {quiet}{replaced}")
    replaced = record_vote(review, vote, now)
    outcome = _outcome(review, vote, now)
    if outcome is None:
        return VoteResult(True, _tally(review, vote) + replaced)
    review.outcome = outcome
    review.status = "decided"
    review.paused_until = None  # decided: nothing waits for a pause to end any more
    changes = f" with changes {changes_text(outcome.modifications)}" if outcome.modifications else ""
    return VoteResult(
        True, f"decided: {outcome.decision.name.lower()} by {outcome.by}{changes}{replaced}", outcome, DECIDED
    )


def changes_text(changes: dict[str, Any]) -> str:
    """A vote's changes as people wrote them (JSON), for replies and logs."""
    return json.dumps(changes, ensure_ascii=False, default=str)


def agreement(vote: Vote) -> str:
    """What the votes that count together share: the decision, and for a modify its very changes - equal as
    JSON, not as Python (``1``, ``1.0`` and ``true`` are different changes to a run) - as a digest, so the store
    can keep and index it ("MODIFY <sha256>"; the other decisions are their names)."""
    if vote.decision is not HumanDecision.MODIFY:
        return vote.decision.name
    changes = json.dumps(vote.modifications, sort_keys=True, default=str)  # ASCII: non-ASCII is escaped
    return f"MODIFY {hashlib.sha256(changes.encode()).hexdigest()}"


def _agreeing(review: Review, vote: Vote) -> list[Vote]:
    """The current votes that count towards ``vote``'s decision: a modify only with identical changes (``vote``'s
    agreement taken once, not per vote compared)."""
    kind = agreement(vote)
    return [v for v in review.votes if v.decision is vote.decision and agreement(v) == kind]


def _count(review: Review, vote: Vote) -> int:
    """How many current votes count towards ``vote``'s decision (``vote`` among them once recorded)."""
    if review.tally is None:
        return len(_agreeing(review, vote))
    return review.tally[agreement(vote)]


#: A vote to cast, with why its voter may not answer (None: they may), decided before the store's lock is taken.
Cast = tuple[Vote, "str | None"]


def cast_votes(review: Review, casts: Sequence[Cast]) -> list[VoteResult]:
    """Cast ``casts`` in order, each at its ``vote.at``, with the refusal decided for it beforehand.

    Casting only appends to ``review.history``, asks whether a vote's
    delivery key is among ``review.delivery_keys`` and reads of the current
    votes only: each voter's own (what it replaces), how many agree with each
    vote, and the agreeing votes themselves only once a decision is complete
    (its voters and their notes) or a modify is cast (the rival changes its
    answer names). So the store casts on a review that holds: ``history``
    empty; ``delivery_keys`` only those of these votes already stored;
    ``tally`` the number of current votes of every agreement of these votes
    (missing ones are never asked); and ``votes`` - in the order of each
    person's latest vote - the current vote of every person of ``casts``
    (``Vote.who``), and every current vote of each agreement
    ``agreements_needed`` names. It gets the same answers and the same
    appended votes as a review holding everything.
    """
    results: list[VoteResult] = []
    for vote, refusal in casts:
        assert vote.at is not None, "a vote to cast carries the time it was cast"
        results.append(cast_vote(review, vote, now=vote.at, authorize_with=_refusing(refusal)))
    return results


def agreements_needed(review: Review, casts: Sequence[Cast]) -> tuple[set[str], bool]:
    """Of a ``review`` holding a ``tally`` (``cast_votes``), the agreements whose every current vote casting
    ``casts`` may read: those these votes may complete (the tally and their votes of it reach
    ``approvals_required``; one with no current vote has none to read), and whether every modify's (a modify's
    answer names the rival changes)."""
    assert review.tally is not None, "a review with every current vote needs none read"
    cast = Counter(agreement(vote) for vote, _ in casts if vote.decision not in SINGLE_VOTE)
    needed = {kind for kind, n in cast.items()
              if review.tally[kind] > 0 and review.tally[kind] + n >= review.policy.approvals_required}
    return needed, any(vote.decision is HumanDecision.MODIFY for vote, _ in casts)


def _refusing(refusal: str | None) -> Authorize:
    """The authorisation asked under the store's lock: the one made before, outside it (it may ask an API)."""
    return lambda _reviewers, _voter: refusal


def record_vote(review: Review, vote: Vote, now: datetime) -> str:
    """Keep one vote per person: a later vote replaces theirs. Returns the note saying what it replaced.

    The one place current votes change (the store keeps them as rows: a cast writes the ones changed here)."""
    key = vote.who
    earlier = next((v for v in review.votes if v.who == key), None)
    cast = replace(vote, at=vote.at or now)
    review.votes = [v for v in review.votes if v.who != key] + [cast]
    kind, was = agreement(cast), None if earlier is None else agreement(earlier)
    if review.tally is not None:  # the store's counts, kept as the votes change
        review.tally[kind] += 1
        if was in review.tally:
            review.tally[was] -= 1
    review.history.append(cast)  # the audit trail: every vote as cast, none replaced
    if vote.delivery_key is not None:
        review.delivery_keys.append(vote.delivery_key)
    if earlier is None or (was == kind and earlier.decision is not HumanDecision.PAUSE):
        return ""
    return f"; replaces your earlier {earlier.decision.name.lower()}"


def _tally(review: Review, vote: Vote) -> str:
    """'approve from local:a recorded: 1 of 2 needed'; a modify also names its changes and any rival ones."""
    counted = _count(review, vote)
    required = review.policy.approvals_required
    text = f"{vote.decision.name.lower()} from {vote.voter} recorded: {counted} of {required} needed"
    if vote.decision is not HumanDecision.MODIFY:
        return text
    kind = agreement(vote)
    rivals = [v for v in review.votes if v.decision is HumanDecision.MODIFY and agreement(v) != kind]
    proposed = "".join(f"; {v.voter} proposed different changes: {changes_text(v.modifications)}" for v in rivals)
    return f"{text} for these changes: {changes_text(vote.modifications)}{proposed}"


def _outcome(review: Review, vote: Vote, now: datetime) -> Outcome | None:
    """The outcome ``vote`` completes, or None while its decision lacks people.

    A reject vetoes alone; approve, retry and modify need ``approvals_required``
    distinct voters (``review.votes`` holds one vote per person) whose current
    vote is that decision - for modify, with identical changes, which are the
    changes applied.
    """
    decision = vote.decision
    if decision in SINGLE_VOTE:
        return Outcome(decision, [vote.voter], now, feedback=vote.feedback)
    if _count(review, vote) < review.policy.approvals_required:
        return None
    agreeing = _agreeing(review, vote)
    notes = "; ".join(f"{v.voter}: {v.feedback}" for v in agreeing if v.feedback.strip())
    changes = dict(vote.modifications) if decision is HumanDecision.MODIFY else {}
    return Outcome(decision, [v.voter for v in agreeing], now, feedback=notes, modifications=changes)


def mark_failed(review: Review, error: str) -> None:
    """Record that the run refused the outcome, so no tick tries to apply it again."""
    if review.outcome is None:
        raise ValueError(f"review {review.id} has no outcome that could have failed (status {review.status})")
    review.status = "failed"
    review.error = error


def mark_applied(review: Review, *, now: datetime) -> None:
    """Record that the runner resumed the run with the outcome; refuse if there is none."""
    if review.outcome is None:
        raise ValueError(f"review {review.id} has no outcome to apply (status {review.status})")
    review.status = "applied"
    review.applied_at = review.applied_at or now
