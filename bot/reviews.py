"""How votes become a decision: the pure rules of a review.

Nothing here reads the clock, touches a file or talks to a channel: every
function takes ``now`` and mutates the ``Review`` it is given, so the rules
are plain table tests and the store can run them inside one locked
read-modify-write (``store.update_review(id, lambda r: cast_vote(r, v, now=now))``).

Rules (design.md "Decide"): N distinct approvals decide APPROVE; any REJECT
vetoes at once; RETRY and MODIFY from one authorised reviewer decide at once;
one vote per person, replaced while the review is open; the first outcome
wins; PAUSE silences reminders, escalation and the default decision until a
time; deadlines decide with the policy default, marked as timed out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from loop_engine.checkpoint import HumanDecision, ReviewResponse

from .durations import format_duration, parse_duration

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
    "authorize",
    "cast_vote",
    "due_actions",
    "decide_by_timeout",
    "mark_applied",
]

#: Format version written into every stored review; newer ones are refused.
REVIEW_FORMAT = 1
#: How long a PAUSE without a duration silences a review.
DEFAULT_PAUSE = timedelta(hours=24)
#: The voter id of a deadline's default outcome; never a person.
TIMEOUT_VOTER = "timeout"

DEFAULTS = ("reject", "pause", "approve")

#: Answers "is this voter in one of the groups/teams (or does it have the
#: permission) the reviewers name?" for checks that need a channel's API.
MembershipCheck = Callable[[str], bool]


class ReviewPolicyError(ValueError):
    """A review policy that cannot work (e.g. default approve without allow_default_approve)."""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dt(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _td(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def _secs(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@dataclass
class Vote:
    """One person's answer; ``voter`` is channel-qualified ("local:alice", "slack:U0AAA")."""

    voter: str
    decision: HumanDecision
    feedback: str = ""
    modifications: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None
    source: str = "local"
    delivery_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "voter": self.voter,
            "decision": self.decision.name,
            "feedback": self.feedback,
            "modifications": dict(self.modifications),
            "at": _iso(self.at),
            "source": self.source,
            "delivery_key": self.delivery_key,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Vote:
        return cls(
            voter=data["voter"],
            decision=HumanDecision[data["decision"]],
            feedback=data.get("feedback", ""),
            modifications=dict(data.get("modifications") or {}),
            at=_dt(data.get("at")),
            source=data.get("source", "local"),
            delivery_key=data.get("delivery_key"),
        )


@dataclass
class Reviewers:
    """Who may vote; None or empty everywhere means anyone who can reach the channel.

    Once any list is set, a voter must be named by the list of their own
    channel (or pass the channel's membership check for groups, teams and
    ``github_min_permission``); a channel with no list refuses everyone.
    """

    local: list[str] | None = None
    slack_users: list[str] | None = None
    slack_groups: list[str] | None = None
    github_users: list[str] | None = None
    github_teams: list[str] | None = None
    github_min_permission: str | None = None

    @property
    def anyone(self) -> bool:
        return not any(
            (self.local, self.slack_users, self.slack_groups, self.github_users, self.github_teams, self.github_min_permission)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "local": self.local,
            "slack_users": self.slack_users,
            "slack_groups": self.slack_groups,
            "github_users": self.github_users,
            "github_teams": self.github_teams,
            "github_min_permission": self.github_min_permission,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reviewers:
        return cls(**{key: data.get(key) for key in cls().to_dict()})


@dataclass
class ReviewPolicy:
    """A loop's review rules, built from its config ``review`` block."""

    reviewers: Reviewers = field(default_factory=Reviewers)
    approvals_required: int = 1
    remind_after: timedelta | None = None
    escalate_after: timedelta | None = None
    escalate_to: list[dict[str, Any]] = field(default_factory=list)
    decide_after: timedelta | None = None
    default: str = "reject"
    allow_default_approve: bool = False

    def __post_init__(self) -> None:
        if self.approvals_required < 1:
            raise ReviewPolicyError(f"approvals_required must be at least 1, got {self.approvals_required}")
        if self.default not in DEFAULTS:
            raise ReviewPolicyError(f"timeout default must be one of {', '.join(DEFAULTS)}, got {self.default!r}")
        if self.default == "approve" and not self.allow_default_approve:
            raise ReviewPolicyError(
                "timeout default 'approve' would let a run go ahead with nobody deciding; "
                "set allow_default_approve: true if that is really wanted, or use reject or pause"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reviewers": self.reviewers.to_dict(),
            "approvals_required": self.approvals_required,
            "remind_after": _secs(self.remind_after),
            "escalate_after": _secs(self.escalate_after),
            "escalate_to": list(self.escalate_to),
            "decide_after": _secs(self.decide_after),
            "default": self.default,
            "allow_default_approve": self.allow_default_approve,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReviewPolicy:
        return cls(
            reviewers=Reviewers.from_dict(data.get("reviewers") or {}),
            approvals_required=data.get("approvals_required", 1),
            remind_after=_td(data.get("remind_after")),
            escalate_after=_td(data.get("escalate_after")),
            escalate_to=list(data.get("escalate_to") or []),
            decide_after=_td(data.get("decide_after")),
            default=data.get("default", "reject"),
            allow_default_approve=data.get("allow_default_approve", False),
        )


@dataclass
class Outcome:
    """The decision a review reached; ``timed_out`` marks a deadline's default."""

    decision: HumanDecision
    decided_by: list[str]
    decided_at: datetime
    timed_out: bool = False
    feedback: str = ""
    modifications: dict[str, Any] = field(default_factory=dict)

    @property
    def by(self) -> str:
        return ", ".join(self.decided_by) or TIMEOUT_VOTER

    def to_response(self, checkpoint_id: str) -> ReviewResponse:
        """The engine's view of the outcome, for ``engine.resume``."""
        return ReviewResponse(
            checkpoint_id=checkpoint_id,
            decision=self.decision,
            feedback=self.feedback,
            modifications=dict(self.modifications),
            reviewer=self.by,
            timestamp=self.decided_at,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision.name,
            "decided_by": list(self.decided_by),
            "decided_at": _iso(self.decided_at),
            "timed_out": self.timed_out,
            "feedback": self.feedback,
            "modifications": dict(self.modifications),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        decided_at = _dt(data["decided_at"])
        assert decided_at is not None
        return cls(
            decision=HumanDecision[data["decision"]],
            decided_by=list(data.get("decided_by") or []),
            decided_at=decided_at,
            timed_out=bool(data.get("timed_out", False)),
            feedback=data.get("feedback", ""),
            modifications=dict(data.get("modifications") or {}),
        )


@dataclass
class Review:
    """A paused run's question to people, with every vote and deadline mark.

    ``status`` moves open -> decided (an outcome exists) -> applied (the
    runner resumed the run with it). ``timed_out_at`` is set when a deadline
    fired with default pause: the review stays open but goes quiet.
    """

    id: str
    loop: str
    run_id: str
    checkpoint_id: str
    request: dict[str, Any]
    policy: ReviewPolicy
    created_at: datetime
    status: str = "open"
    votes: list[Vote] = field(default_factory=list)
    outcome: Outcome | None = None
    posts: list[dict[str, Any]] = field(default_factory=list)
    paused_until: datetime | None = None
    reminded_at: datetime | None = None
    escalated_at: datetime | None = None
    applied_at: datetime | None = None
    delivery_keys: list[str] = field(default_factory=list)
    timed_out_at: datetime | None = None

    @property
    def approvals(self) -> list[str]:
        return [v.voter for v in self.votes if v.decision is HumanDecision.APPROVE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": REVIEW_FORMAT,
            "id": self.id,
            "loop": self.loop,
            "run_id": self.run_id,
            "checkpoint_id": self.checkpoint_id,
            "request": self.request,
            "policy": self.policy.to_dict(),
            "created_at": _iso(self.created_at),
            "status": self.status,
            "votes": [v.to_dict() for v in self.votes],
            "outcome": None if self.outcome is None else self.outcome.to_dict(),
            "posts": list(self.posts),
            "paused_until": _iso(self.paused_until),
            "reminded_at": _iso(self.reminded_at),
            "escalated_at": _iso(self.escalated_at),
            "applied_at": _iso(self.applied_at),
            "delivery_keys": list(self.delivery_keys),
            "timed_out_at": _iso(self.timed_out_at),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Review:
        version = data.get("format")
        if not isinstance(version, int) or version > REVIEW_FORMAT:
            raise ValueError(f"review format {version!r} is not one this loopbot reads (up to {REVIEW_FORMAT}); upgrade loopbot")
        created_at = _dt(data["created_at"])
        assert created_at is not None
        return cls(
            id=data["id"],
            loop=data["loop"],
            run_id=data["run_id"],
            checkpoint_id=data["checkpoint_id"],
            request=dict(data.get("request") or {}),
            policy=ReviewPolicy.from_dict(data.get("policy") or {}),
            created_at=created_at,
            status=data.get("status", "open"),
            votes=[Vote.from_dict(v) for v in data.get("votes") or []],
            outcome=None if data.get("outcome") is None else Outcome.from_dict(data["outcome"]),
            posts=list(data.get("posts") or []),
            paused_until=_dt(data.get("paused_until")),
            reminded_at=_dt(data.get("reminded_at")),
            escalated_at=_dt(data.get("escalated_at")),
            applied_at=_dt(data.get("applied_at")),
            delivery_keys=list(data.get("delivery_keys") or []),
            timed_out_at=_dt(data.get("timed_out_at")),
        )


@dataclass
class VoteResult:
    """What to tell the voter; ``outcome`` is set only when this vote decided the review."""

    accepted: bool
    message: str
    outcome: Outcome | None = None


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
        named = ", ".join(reviewers.local or []) or "nobody"
        return f"{name} is not a reviewer of this loop for local votes (review.reviewers.local: {named})"
    if channel == "slack":
        if key in _fold(reviewers.slack_users):
            return None
        if reviewers.slack_groups and is_member is not None and is_member(voter):
            return None
        return f"<@{name}> is not one of this loop's Slack reviewers (review.reviewers.slack_users / slack_groups)"
    if channel == "github":
        if key in _fold(reviewers.github_users):
            return None
        if (reviewers.github_teams or reviewers.github_min_permission) and is_member is not None and is_member(voter):
            return None
        return f"@{name} is not one of this loop's GitHub reviewers (review.reviewers.github_users / github_teams / github_min_permission)"
    return f"votes from channel {channel!r} are not accepted for this loop"


def _already_decided(review: Review) -> str:
    outcome = review.outcome
    assert outcome is not None
    how = "timed out, " if outcome.timed_out else ""
    return f"already decided by {outcome.by} at {outcome.decided_at.isoformat()} ({how}{outcome.decision.name.lower()})"


def _pause_until(vote: Vote, now: datetime) -> datetime:
    """A PAUSE lasts until modifications["until"], else the duration in the feedback, else 24h."""
    until = vote.modifications.get("until")
    if isinstance(until, datetime):
        return until
    if isinstance(until, str) and until:
        return datetime.fromisoformat(until)
    words = vote.feedback.split()
    if words:
        try:
            return now + parse_duration(words[0])
        except ValueError:
            pass  # free text, not a duration: the default pause applies
    return now + DEFAULT_PAUSE


def cast_vote(review: Review, vote: Vote, *, now: datetime, is_member: MembershipCheck | None = None) -> VoteResult:
    """Record ``vote`` on ``review`` (mutating it) when the rules allow, and say what happened."""
    if vote.delivery_key is not None and vote.delivery_key in review.delivery_keys:
        return VoteResult(False, "duplicate delivery")
    if review.outcome is not None:
        return VoteResult(False, _already_decided(review))
    if vote.voter == TIMEOUT_VOTER:
        return VoteResult(False, "the timeout voter is reserved for deadlines; vote as a person")
    reason = authorize(review.policy.reviewers, vote.voter, is_member)
    if reason is not None:
        return VoteResult(False, f"vote refused: {reason}")
    if vote.decision is HumanDecision.REJECT and not vote.feedback.strip():
        return VoteResult(False, "a reject needs a reason, e.g. `reject the labels are wrong`")
    if vote.decision is HumanDecision.MODIFY and not vote.modifications:
        return VoteResult(False, "a modify needs at least one change, e.g. `modify key=value`")
    if vote.decision is HumanDecision.PAUSE:
        try:
            until = _pause_until(vote, now)
        except ValueError:
            return VoteResult(False, f"pause until {vote.modifications.get('until')!r} is not an ISO time")
        vote = replace(vote, modifications={**vote.modifications, "until": until.isoformat()})

    vote = replace(vote, at=vote.at or now)
    key = vote.voter.casefold()
    review.votes = [v for v in review.votes if v.voter.casefold() != key] + [vote]
    if vote.delivery_key is not None:
        review.delivery_keys.append(vote.delivery_key)

    decision = vote.decision
    if decision is HumanDecision.PAUSE:
        review.paused_until = datetime.fromisoformat(vote.modifications["until"])
        return VoteResult(True, f"paused until {review.paused_until.isoformat()}: no reminders or default decision until then; the review stays open")
    if decision is HumanDecision.APPROVE:
        approvers = [v for v in review.votes if v.decision is HumanDecision.APPROVE]
        required = review.policy.approvals_required
        if len(approvers) < required:
            return VoteResult(True, f"approval from {vote.voter} recorded: {len(approvers)} of {required} needed")
        notes = "; ".join(f"{v.voter}: {v.feedback}" for v in approvers if v.feedback.strip())
        outcome = Outcome(decision, [v.voter for v in approvers], now, feedback=notes)
    else:
        outcome = Outcome(decision, [vote.voter], now, feedback=vote.feedback, modifications=dict(vote.modifications))
    review.outcome = outcome
    review.status = "decided"
    return VoteResult(True, f"decided: {decision.name.lower()} by {outcome.by}", outcome)


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
        raise ReviewPolicyError("timeout default 'approve' needs allow_default_approve: true in the loop's review.timeout")
    waited = format_duration(policy.decide_after) if policy.decide_after is not None else "the deadline"
    decision = HumanDecision[policy.default.upper()]
    if decision is HumanDecision.PAUSE:
        review.timed_out_at = now
        return Outcome(
            decision,
            [TIMEOUT_VOTER],
            now,
            timed_out=True,
            feedback=f"timed out after {waited} with no decision; default pause: the run keeps waiting for a person",
        )
    outcome = Outcome(
        decision,
        [TIMEOUT_VOTER],
        now,
        timed_out=True,
        feedback=f"timed out after {waited} with no decision; default outcome {policy.default} applied (no person decided)",
    )
    review.timed_out_at = now
    review.outcome = outcome
    review.status = "decided"
    return outcome


def mark_applied(review: Review, *, now: datetime) -> None:
    """Record that the runner resumed the run with the outcome; refuse if there is none."""
    if review.outcome is None:
        raise ValueError(f"review {review.id} has no outcome to apply (status {review.status})")
    review.status = "applied"
    review.applied_at = review.applied_at or now
