"""Where does a review go, and how does an answer come back? The neutral types every channel speaks.

Outbound, the bot hands a channel a ``Target`` (which Slack channel, which
GitHub repository and issue) and a ``ReviewPost`` (what to show) and keeps
the ``MessageRef`` it gets back, so that a later update - the outcome, a
reminder - lands on the same message and a repost after a crash finds the
first message instead of posting twice.

Inbound, an adapter turns a slash command, a button, a comment or a label
into a ``Reply`` (who, about which review, what they said) and hands it to
a ``VoteHandler`` the bot gives it; the handler decides and returns the
``Answer`` the voter is told. Channels never import ``bot``: everything they
need is in these types, and they never decide anything themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from loop_engine.review import ReviewRequest  # not .checkpoint: that loads persistence and the state types

from .command_error import CommandError
from .commands import Command

__all__ = [
    "Answer",
    "AnswerKind",
    "Channel",
    "ChannelError",
    "Identity",
    "MessageRef",
    "PostOutcome",
    "Reply",
    "ReviewPost",
    "Target",
    "TARGET_KINDS",
    "VoteHandler",
]

#: The channel kinds a target may name.
TARGET_KINDS = ("local", "slack", "github")


class ChannelError(Exception):
    """A channel could not deliver (a network error, a refused API call, an unwritable file).

    ``retry_after`` is the wait the other side asked for (HTTP 429
    ``Retry-After``, a rate limit's reset), in seconds; ``permanent`` says
    retrying cannot help (a channel the bot was removed from, a deleted
    issue), so the outbox reports it instead of retrying forever.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, permanent: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.permanent = permanent


@dataclass(frozen=True)
class Target:
    """One place a review goes: a channel kind plus its address.

    ``{local: {}}``, ``{slack: {channel: C0123}}``, ``{github: {repository:
    octo/ops, issue: 42}}`` (no issue: the channel opens one issue per run).
    ``key`` names the target in refs, outbox tasks and ``status``.
    """

    kind: str
    channel: str | None = None
    repository: str | None = None
    issue: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise ValueError(f"unknown target kind {self.kind!r}; one of {', '.join(TARGET_KINDS)}")
        if self.kind == "slack" and not self.channel:
            raise ValueError("a slack target needs a channel, e.g. {slack: {channel: C0123ABC}}")
        if self.kind == "github" and not self.repository:
            raise ValueError("a github target needs a repository, e.g. {github: {repository: octo/ops}}")

    @property
    def key(self) -> str:
        if self.kind == "slack":
            return f"slack:{self.channel}"
        if self.kind == "github":
            return f"github:{self.repository}" + (f"#{self.issue}" if self.issue is not None else "")
        return "local"

    def to_dict(self) -> dict[str, Any]:
        """The config's own shape, so a stored target reads like the YAML that made it."""
        if self.kind == "slack":
            return {"slack": {"channel": self.channel}}
        if self.kind == "github":
            address: dict[str, Any] = {"repository": self.repository}
            if self.issue is not None:
                address["issue"] = self.issue
            return {"github": address}
        return {"local": {}}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Target:
        """``{slack: {channel}}`` and friends (``None`` values are ignored, as pydantic dumps them)."""
        given = {kind: value for kind, value in raw.items() if value is not None}
        if len(given) != 1:
            raise ValueError(f"a target names exactly one of {', '.join(TARGET_KINDS)}, got {dict(raw)!r}")
        ((kind, address),) = given.items()
        if not isinstance(address, Mapping):
            raise ValueError(f"target {kind}: expected a mapping of settings, got {address!r}")
        if kind == "slack":
            return cls("slack", channel=str(address.get("channel") or ""))
        if kind == "github":
            issue = address.get("issue")
            return cls("github", repository=str(address.get("repository") or ""),
                       issue=None if issue is None else int(issue))
        return cls(str(kind))


@dataclass(frozen=True)
class PostOutcome:
    """How a review was decided, as data: a channel's labels and words follow it, never a search of text.

    ``decision`` is the engine's decision in lower case ("approve", "reject",
    "retry", "modify"); ``decided_by`` the voters' qualified ids
    (``github:alice``), empty for a timeout's default; ``reason`` the
    feedback as given.
    """

    decision: str
    decided_by: tuple[str, ...] = ()
    reason: str = ""
    timed_out: bool = False


@dataclass(frozen=True)
class ReviewPost:
    """What a channel shows for one review.

    Each channel words its own way to answer (a decide line, buttons, a slash
    command); ``reviewers`` says who may answer, per channel in that
    channel's own ids (``{"slack": ["U0AAA"], "github": ["alice"]}``; a
    channel absent from it is open to anyone who reaches it unless
    ``restricted``), ``reviewers_hint`` the same in words, and
    ``approvals_required`` how many must agree, so nobody approves and waits
    unaware. ``status`` is the review's (open, decided, applied, failed),
    ``outcome`` its decision once there is one. A GitHub team reviewer is
    listed as ``org/team`` among ``reviewers["github"]``, and
    ``min_permission`` opens a GitHub review to everyone with at least that
    permission on the repository.
    ``page_url`` is the review's web page (a signed, expiring link), when pages are on.
    """

    review_id: str
    loop: str
    run_id: str
    request: ReviewRequest
    reviewers_hint: str = ""
    approvals_required: int = 1
    reviewers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    restricted: bool = False
    status: str = "open"
    outcome: PostOutcome | None = None
    min_permission: str = ""
    page_url: str | None = None


@dataclass(frozen=True)
class MessageRef:
    """A channel's handle on a message it posted; ``data`` must be JSON values.

    ``target`` is the ``Target.key`` it was posted for: a review keeps one
    ref per target, so two Slack channels hold two refs.
    """

    channel: str
    data: dict[str, Any]
    target: str = ""

    def __post_init__(self) -> None:
        if not self.target:  # a channel with one place (local) needs no key of its own
            object.__setattr__(self, "target", self.channel)

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "data": dict(self.data), "target": self.target}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> MessageRef:
        try:
            channel, data = raw["channel"], raw["data"]
        except (KeyError, TypeError):
            raise ValueError(f"a message reference needs 'channel' and 'data', got {raw!r}") from None
        if not isinstance(channel, str) or not isinstance(data, dict):
            raise ValueError(f"a message reference needs a string 'channel' and a dict 'data', got {raw!r}")
        target = raw.get("target") or channel
        if not isinstance(target, str):
            raise ValueError(f"a message reference's 'target' must be a string, got {raw!r}")
        return cls(channel, dict(data), target)

    def matches(self, context: Mapping[str, Any]) -> bool:
        """Does this message live where ``context`` points (a Slack thread, a GitHub issue)?"""
        return all(self.data.get(key) == value for key, value in context.items())


@dataclass(frozen=True)
class Identity:
    """Who answered, as their channel knows them: ``Identity("slack", "U0AAA", "alice")``."""

    channel: str
    id: str
    display: str = ""

    @property
    def qualified(self) -> str:
        """The voter id reviews store: ``slack:U0AAA``, ``github:alice``, ``local:alice``."""
        return f"{self.channel}:{self.id}"

    @property
    def shown(self) -> str:
        return self.display or self.id


@dataclass(frozen=True)
class Reply:
    """One answer as it arrived, before anyone decided whether it counts.

    ``command`` is what ``adapters.commands`` made of the text (or the error
    to tell the sender). The review is ``review_id`` when the text or button
    names it, else the one open review whose message matches ``context``
    (``{"channel": "C0123", "thread_ts": "1700.1"}`` for a Slack thread,
    ``{"repository": "octo/ops", "issue": 42}`` for a GitHub issue).
    ``dedupe_key`` (a delivery id, an action ts, a comment id) makes a
    redelivery count once; ``respond`` is what the channel needs to answer
    the sender later (a response_url, a comment to react to).
    """

    voter: Identity
    command: Command | CommandError
    review_id: str | None = None
    context: Mapping[str, Any] | None = None
    dedupe_key: str | None = None
    via: str = ""
    respond: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.review_id is None and isinstance(self.command, Command) and self.command.review_id:
            object.__setattr__(self, "review_id", self.command.review_id)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: a reply queued durably (GitHub's, webhook or polled) is cast after it was acknowledged."""
        command = self.command
        return {
            "voter": {"channel": self.voter.channel, "id": self.voter.id, "display": self.voter.display},
            "command": command.to_dict() if isinstance(command, Command) else {"error": str(command)},
            "review_id": self.review_id, "context": None if self.context is None else dict(self.context),
            "dedupe_key": self.dedupe_key, "via": self.via, "respond": dict(self.respond),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Reply:
        try:
            voter, command = raw["voter"], raw["command"]
            return cls(
                Identity(voter["channel"], voter["id"], voter.get("display", "")),
                CommandError(command["error"]) if "error" in command else Command.from_dict(command),
                raw.get("review_id"), raw.get("context"), raw.get("dedupe_key"), raw.get("via", ""),
                dict(raw.get("respond") or {}),
            )
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not a stored reply ({type(err).__name__}: {err}): {raw!r}") from None


class AnswerKind(StrEnum):
    """Every reply gets exactly one of these."""

    COUNTED = "counted"  # recorded, k of N so far
    DECIDED = "decided"  # this vote decided the review
    REFUSED = "refused"  # not allowed (who may), or not valid (why)
    DUPLICATE = "duplicate"  # this delivery was already counted
    UNKNOWN_REVIEW = "unknown_review"  # no such review (did-you-mean), or none open here
    ALREADY_DECIDED = "already_decided"  # too late: decided by whom, when
    INFO = "info"  # help or status, no vote
    INVALID = "invalid"  # the text was not a valid command (usage)
    NOT_RECORDED = "not_recorded"  # the vote could not be stored (a full disk, the store down): try again


@dataclass(frozen=True)
class Answer:
    """What the sender of a ``Reply`` is told, worded for a person."""

    kind: AnswerKind
    text: str
    review_id: str | None = None

    @property
    def counted(self) -> bool:
        return self.kind in (AnswerKind.COUNTED, AnswerKind.DECIDED)


#: The bot's entry point for every inbound answer; adapters call it and relay the Answer.
VoteHandler = Callable[[Reply], Answer]


@runtime_checkable
class Channel(Protocol):
    """One kind of place reviews are posted to. Methods raise ChannelError when delivery fails.

    Every method may be retried after a crash or a failure, so each must be
    idempotent: posting the same review to the same target again finds and
    returns the first message (the local file, Slack message metadata, the
    GitHub ``<!-- loopbot:review=ID -->`` marker) instead of posting twice.
    """

    @property
    def name(self) -> str:
        """The channel's kind, e.g. "local", "slack", "github"; equals ``MessageRef.channel``."""
        ...

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        """Show the review at ``target``; posting the same review there again reuses the first message."""
        ...

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        """Add ``text`` (an outcome, a reminder, the run's end) to the message ``ref`` points at.

        When ``post.status`` is no longer "open" the message should stop
        inviting answers (buttons removed, "How to answer" gone).
        """
        ...

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        """Show the review at an escalation ``target`` with ``text`` on top."""
        ...

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        """Tell the sender of a reply what became of it (``respond`` comes from that ``Reply``)."""
        ...
