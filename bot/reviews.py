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
outcome wins; PAUSE silences reminders, escalation and the default decision
until an aware, future time (a time without a zone is refused: it would be
read in nobody's time zone); deadlines decide with the policy default,
marked as timed out. A vote carries only changes its decision can
use (MODIFY: the engine's keys; PAUSE: ``until``), so an outcome never fails
when the run resumes for a reason the voter could have been told.
The records themselves (Vote, Review, ...) live in ``bot.review_records``
and are re-exported here.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from loop_engine.review import HumanDecision

from adapters.durations import DurationRangeError, format_duration, parse_duration
from .review_records import (
    DEFAULT_PAUSE,
    REVIEW_FORMAT,
    TIMEOUT_VOTER,
    MembershipCheck,
    Outcome,
    Review,
    Reviewers,
    ReviewPolicy,
    ReviewPolicyError,
    Vote,
)

__all__ = [
    "REVIEW_FORMAT",
    "DEFAULT_PAUSE",
    "TIMEOUT_VOTER",
    "ReviewPolicyError",
    "Vote",
    "Reviewers",
    "ReviewPolicy",
    "Outcome",
    "Review",
    "VoteResult",
    "MembershipCheck",
    "Authorize",
    "COUNTED",
    "DECIDED",
    "REFUSED",
    "DUPLICATE",
    "ALREADY_DECIDED",
    "authorize",
    "cast_vote",
    "cast_votes",
    "Cast",
    "changes_problem",
    "changes_text",
    "pause_problem",
    "due_actions",
    "next_deadline",
    "decide_by_timeout",
    "mark_applied",
    "mark_failed",
]

#: Decisions that take effect on one person's vote; the others need ``approvals_required`` people.
SINGLE_VOTE = (HumanDecision.REJECT, HumanDecision.PAUSE)
#: How far ahead ``pause --set until=TIME`` may reach: further is a typo, and near year 9999 the
#: deadline arithmetic after the pause would overflow on every tick.
MAX_PAUSE_AHEAD = timedelta(days=3653)
#: "2031-01-01Z" / "2031-01-01+01:00": a zone with no time before it (Python reads the latter as 01:00, no zone).
_DATE_THEN_ZONE = re.compile(r"\A(\d{4}-\d{2}-\d{2})(Z|[+-]\d{2}:\d{2})\Z", re.IGNORECASE)

#: Why a vote was or was not recorded (``VoteResult.kind``): each answer a voter can get.
COUNTED, DECIDED, REFUSED, DUPLICATE, ALREADY_DECIDED = "counted", "decided", "refused", "duplicate", "already_decided"

#: Says why ``voter`` may not vote under ``reviewers`` (None: may vote); ``authorize`` is the default.
Authorize = Callable[[Reviewers, str], "str | None"]


@dataclass
class VoteResult:
    """What to tell the voter; ``outcome`` is set only when this vote decided the review."""

    accepted: bool
    message: str
    outcome: Outcome | None = None
    kind: str = COUNTED


def _fold(names: list[str] | None) -> set[str]:
    return {n.casefold() for n in names or []}


def authorize(reviewers: Reviewers, voter: str, is_member: MembershipCheck | None = None) -> str | None:
    """None when ``voter`` may vote, else the reason it may not (said to the voter)."""
    channel, sep, name = voter.partition(":")
    if not sep or not channel or not name:
        return f"voter {voter!r} is not a channel-qualified id like local:alice or slack:U0AAA"
    if reviewers.anyone:
        return None
    key = name.casefold()
    if channel == "local":
        if key in _fold(reviewers.local):
            return None
        if reviewers.local == []:
            return "review.reviewers.local is empty, so nobody may vote locally; add names to it (e.g. local: [alice])"
        named = ", ".join(reviewers.local or []) or "nobody"
        return f"{name} is not a reviewer of this loop for local votes (review.reviewers.local: {named})"
    if channel == "slack":
        if key in _fold(reviewers.slack_users):
            return None
        if reviewers.slack_groups and is_member is not None and is_member(voter):
            return None
        who = [f"<@{user}>" for user in reviewers.slack_users or []]
        who += [f"<!subteam^{group}>" for group in reviewers.slack_groups or []]
        may = f"; who may answer: {', '.join(who)}" if who else ""
        return (f"<@{name}> is not one of this loop's Slack reviewers "
                f"(review.reviewers.slack_users / slack_groups){may}")
    if channel == "github":
        if key in _fold(reviewers.github_users):
            return None
        if (reviewers.github_teams or reviewers.github_min_permission) and is_member is not None and is_member(voter):
            return None
        return (
            f"@{name} is not one of this loop's GitHub reviewers "
            "(review.reviewers.github_users / github_teams / github_min_permission)"
        )
    return f"votes from channel {channel!r} are not accepted for this loop"


def _already_decided(review: Review) -> str:
    outcome = review.outcome
    assert outcome is not None
    how = "timed out, " if outcome.timed_out else ""
    return f"already decided by {outcome.by} at {outcome.decided_at.isoformat()} ({how}{outcome.decision.name.lower()})"


def _explicit_until(until: object, now: datetime) -> datetime:
    """An ISO time with a zone, later than ``now`` and not absurdly far; ValueError (the voter's message) otherwise."""
    parsed = _aware_time(until, now)
    written = until.isoformat() if isinstance(until, datetime) else str(until)
    if parsed <= now:
        raise ValueError(
            f"pause until {written!r} is in the past (it is now {now.isoformat(timespec='minutes')}); "
            "give a later time, or a duration such as `pause 2h`"
        )
    if parsed - now > MAX_PAUSE_AHEAD:
        raise ValueError(
            f"pause until {written!r} is more than 10 years ahead; pause until an earlier time, and again when it ends"
        )
    return parsed


def _aware_time(until: object, now: datetime) -> datetime:
    """``until`` as an aware datetime; ValueError with a corrected example otherwise.

    A time without a zone is refused rather than guessed: UTC and the
    voter's local time can differ by hours, and the voter can say which.
    Every example a message suggests parses here (the tests check it).
    """
    written = until.isoformat() if isinstance(until, datetime) else str(until)
    zone_after_date = _DATE_THEN_ZONE.match(written.strip()) if isinstance(until, str) else None
    if zone_after_date:
        date, zone = zone_after_date.groups()
        raise ValueError(f"pause until {written!r} has a zone but no time; write both, e.g. {date}T00:00{zone.upper()}")
    parsed = until if isinstance(until, datetime) else None
    if isinstance(until, str):
        with contextlib.suppress(ValueError):
            parsed = datetime.fromisoformat(until.strip())
    if parsed is None:
        tomorrow = (now.astimezone(UTC) + timedelta(days=1)).date().isoformat()
        raise ValueError(f"pause until {written!r} is not an ISO time, e.g. {tomorrow}T09:00+01:00")
    if parsed.tzinfo is None:
        base = parsed.isoformat(timespec="minutes" if not (parsed.second or parsed.microsecond) else "auto")
        raise ValueError(f"pause until {written!r} has no time zone; add one, e.g. {base}Z (UTC) or {base}+01:00")
    return parsed


def _pause_until(vote: Vote, now: datetime) -> datetime:
    """A PAUSE lasts until modifications["until"], else the duration in the feedback, else 24h.

    Feedback that is not a duration is a note; a duration over the cap is
    refused, not read as a note, so ``pause 3000000d`` is never a 24h pause.
    """
    if "until" in vote.modifications:  # given empty (an unset shell variable) is a mistake, not "24h"
        if vote.modifications["until"] in (None, ""):
            raise ValueError("pause until '' is empty; give a time such as 2031-01-01T09:00Z, or leave --set until out")
        return _explicit_until(vote.modifications["until"], now)
    words = vote.feedback.split()
    if words:
        try:
            return now + parse_duration(words[0])
        except DurationRangeError:
            raise
        except ValueError:
            pass  # free text, not a duration: the default pause applies
    return now + DEFAULT_PAUSE


def pause_problem(until: object, now: datetime) -> str | None:
    """Why ``pause --set until=...`` is refused (no zone, passed, too far ahead), else None: the CLI says it first."""
    try:
        _explicit_until(until, now)
    except ValueError as err:
        return str(err)
    return None


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


def _check(review: Review, vote: Vote, allowed: Callable[[Reviewers, str], str | None]) -> tuple[str, str] | None:
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
            until = _pause_until(vote, now)
        except ValueError as err:
            return VoteResult(False, str(err), kind=REFUSED)
        replaced = _record(review, replace(vote, modifications={**vote.modifications, "until": until.isoformat()}), now)
        review.paused_until = until
        quiet = "no reminders or default decision until then; the review stays open"
        return VoteResult(True, f"paused until {until.isoformat()}: {quiet}{replaced}")
    replaced = _record(review, vote, now)
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


def _same_changes(a: Vote, b: Vote) -> bool:
    """Equal as JSON, not as Python: ``1``, ``1.0`` and ``true`` are different changes to a run."""
    return json.dumps(a.modifications, sort_keys=True, default=str) == json.dumps(
        b.modifications, sort_keys=True, default=str
    )


def _agrees(other: Vote, vote: Vote) -> bool:
    """Does ``other`` count towards ``vote``'s decision? A modify only with identical changes."""
    if other.decision is not vote.decision:
        return False
    return vote.decision is not HumanDecision.MODIFY or _same_changes(other, vote)


#: A vote to cast, with why its voter may not answer (None: they may), decided before the store's lock is taken.
Cast = tuple[Vote, "str | None"]


def cast_votes(review: Review, casts: Sequence[Cast]) -> list[VoteResult]:
    """Cast ``casts`` in order, each at its ``vote.at``, with the refusal decided for it beforehand.

    Casting only appends to ``review.history`` and asks whether a vote's
    delivery key is among ``review.delivery_keys``: a review whose history
    is empty and whose keys are only those of these votes gets the same
    answers and the same appended votes (the store casts on such a one).
    """
    results: list[VoteResult] = []
    for vote, refusal in casts:
        assert vote.at is not None, "a vote to cast carries the time it was cast"
        results.append(cast_vote(review, vote, now=vote.at, authorize_with=_refusing(refusal)))
    return results


def _refusing(refusal: str | None) -> Authorize:
    """The authorisation asked under the store's lock: the one made before, outside it (it may ask an API)."""
    return lambda _reviewers, _voter: refusal


def _record(review: Review, vote: Vote, now: datetime) -> str:
    """Keep one vote per person: a later vote replaces theirs. Returns the note saying what it replaced."""
    key = vote.who
    earlier = next((v for v in review.votes if v.who == key), None)
    cast = replace(vote, at=vote.at or now)
    review.votes = [v for v in review.votes if v.who != key] + [cast]
    review.history.append(cast)  # the audit trail: every vote as cast, none replaced
    if vote.delivery_key is not None:
        review.delivery_keys.append(vote.delivery_key)
    if earlier is None or (_agrees(earlier, vote) and earlier.decision is not HumanDecision.PAUSE):
        return ""
    return f"; replaces your earlier {earlier.decision.name.lower()}"


def _tally(review: Review, vote: Vote) -> str:
    """'approve from local:a recorded: 1 of 2 needed'; a modify also names its changes and any rival ones."""
    counted = sum(1 for v in review.votes if _agrees(v, vote))
    required = review.policy.approvals_required
    text = f"{vote.decision.name.lower()} from {vote.voter} recorded: {counted} of {required} needed"
    if vote.decision is not HumanDecision.MODIFY:
        return text
    rivals = [v for v in review.votes if v.decision is HumanDecision.MODIFY and not _same_changes(v, vote)]
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
    agreeing = [v for v in review.votes if _agrees(v, vote)]
    if len(agreeing) < review.policy.approvals_required:
        return None
    notes = "; ".join(f"{v.voter}: {v.feedback}" for v in agreeing if v.feedback.strip())
    changes = dict(vote.modifications) if decision is HumanDecision.MODIFY else {}
    return Outcome(decision, [v.voter for v in agreeing], now, feedback=notes, modifications=changes)


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
