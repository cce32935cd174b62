"""The records of a review: votes, reviewer lists, policy, outcome, the review itself.

Plain data with ``to_dict``/``from_dict`` (format-versioned) so the store can
keep them as JSON; the rules that change them live in ``bot.reviews``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from loop_engine.review import HumanDecision, ReviewResponse

__all__ = [
    "REVIEW_FORMAT",
    "DEFAULT_PAUSE",
    "TIMEOUT_VOTER",
    "MembershipCheck",
    "ReviewPolicyError",
    "Vote",
    "Reviewers",
    "ReviewPolicy",
    "Outcome",
    "Review",
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
    """Stored times are read as aware: a naive one (written before votes were checked) is taken as UTC.

    Comparing a naive time with the aware clock would raise in every tick.
    """
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _td(value: float | None) -> timedelta | None:
    return None if value is None else timedelta(seconds=value)


def _secs(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@dataclass
class Vote:
    """One person's answer; ``voter`` is channel-qualified ("local:alice", "slack:U0AAA").

    ``person`` is who that account belongs to (the config's ``people:``), so
    one person answering on Slack and on GitHub counts once; without an entry
    each account is its own person.
    """

    voter: str
    decision: HumanDecision
    feedback: str = ""
    modifications: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None
    source: str = "local"
    delivery_key: str | None = None
    person: str | None = None

    @property
    def who(self) -> str:
        """The key one vote per person is kept under."""
        return (self.person or self.voter).casefold()

    def to_dict(self) -> dict[str, Any]:
        return {
            "voter": self.voter,
            "decision": self.decision.name,
            "feedback": self.feedback,
            "modifications": dict(self.modifications),
            "at": _iso(self.at),
            "source": self.source,
            "delivery_key": self.delivery_key,
            "person": self.person,
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
            person=data.get("person"),
        )


@dataclass
class Reviewers:
    """Who may vote; nothing set (every key None) means anyone who can reach the channel.

    Once any key is set - even to an empty list - a voter must be named by the
    list of their own channel (or pass the channel's membership check for
    groups, teams and ``github_min_permission``); a channel with no list, or
    an empty one, refuses everyone. ``local: []`` is read as "nobody votes
    locally", never as "anyone": an empty list that opened the door to all
    would turn a config slip into a hole.
    """

    local: list[str] | None = None
    slack_users: list[str] | None = None
    slack_groups: list[str] | None = None
    github_users: list[str] | None = None
    github_teams: list[str] | None = None
    github_min_permission: str | None = None
    people: list[str] | None = None

    @property
    def anyone(self) -> bool:
        return all(getattr(self, key) is None for key in _REVIEWER_KEYS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "local": self.local,
            "slack_users": self.slack_users,
            "slack_groups": self.slack_groups,
            "github_users": self.github_users,
            "github_teams": self.github_teams,
            "github_min_permission": self.github_min_permission,
            "people": self.people,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reviewers:
        return cls(**{key: data.get(key) for key in _REVIEWER_KEYS})


#: The fields of ``Reviewers``, once: reading 10,000 reviews built a throwaway instance and dict per review.
_REVIEWER_KEYS = tuple(Reviewers().to_dict())


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
    runner resumed the run with it), or decided -> failed when the run
    refused the outcome (``error`` says why; the run failed with it, and no
    tick tries again). ``timed_out_at`` is set when a deadline fired with
    default pause: the review stays open but goes quiet. ``votes`` holds each person's
    current vote (what counts), in the order of their latest vote; ``history`` every vote as cast, in order, with
    its time - pauses and replaced votes too - and is only ever appended to.
    ``tally``: None when ``votes`` holds every current vote; else ``votes`` holds only some of them (the store's
    cast: ``reviews.cast_votes`` says which) and ``tally`` counts the current votes of each agreement
    (``reviews.agreement``) the cast asks about. It is never stored.
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
    error: str | None = None
    targets: list[dict[str, Any]] = field(default_factory=list)
    history: list[Vote] = field(default_factory=list)
    tally: dict[str, int] | None = field(default=None, compare=False, repr=False)

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
            "delivery_keys": sorted(self.delivery_keys),  # a set: two stores holding the same write the same
            "timed_out_at": _iso(self.timed_out_at),
            "error": self.error,
            "targets": list(self.targets),
            "history": [v.to_dict() for v in self.history],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Review:
        version = data.get("format")
        if not isinstance(version, int) or version > REVIEW_FORMAT:
            raise ValueError(
                f"review format {version!r} is not one this loopbot reads (up to {REVIEW_FORMAT}); upgrade loopbot"
            )
        created_at = _dt(data["created_at"])
        assert created_at is not None
        votes = [Vote.from_dict(v) for v in data.get("votes") or []]
        # stored before the history was kept: the current votes are all that is known of it
        history = [Vote.from_dict(v) for v in data["history"]] if "history" in data else list(votes)
        return cls(
            id=data["id"],
            loop=data["loop"],
            run_id=data["run_id"],
            checkpoint_id=data["checkpoint_id"],
            request=dict(data.get("request") or {}),
            policy=ReviewPolicy.from_dict(data.get("policy") or {}),
            created_at=created_at,
            status=data.get("status", "open"),
            votes=votes,
            outcome=None if data.get("outcome") is None else Outcome.from_dict(data["outcome"]),
            posts=list(data.get("posts") or []),
            paused_until=_dt(data.get("paused_until")),
            reminded_at=_dt(data.get("reminded_at")),
            escalated_at=_dt(data.get("escalated_at")),
            applied_at=_dt(data.get("applied_at")),
            delivery_keys=list(data.get("delivery_keys") or []),
            timed_out_at=_dt(data.get("timed_out_at")),
            error=data.get("error"),
            targets=list(data.get("targets") or []),
            history=history,
        )
