"""What a human is asked (``ReviewRequest``) and what comes back (``ReviewResponse``).

These are stored records, not suspended coroutines: a request is written to
disk and posted to Slack or GitHub, and the response may arrive days later
in another process. Both therefore round-trip through plain JSON
(``to_dict``/``from_dict``, ``to_json``/``from_json``), enums by name and
times as ISO-8601. ``loop_engine.checkpoint`` re-exports everything here.
A request may carry the loop's ``Proposal`` (``loop_engine.proposal``):
what approving does, as data; a request without one is stored as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from .jsonvalue import decode_datetime, decode_enum, iso_datetime, json_copy
from .markdown import escape_inline, render_table, show_value

if TYPE_CHECKING:  # pragma: no cover - a request decoded with a proposal loads it (``from_dict``)
    from .proposal import Proposal

__all__ = ["CheckpointTrigger", "HumanDecision", "ReviewRequest", "ReviewResponse", "with_zone"]


class CheckpointTrigger(Enum):
    """Why a run stopped to ask; ``print()`` shows ``CheckpointTrigger.ON_MAJOR_FAILURE``."""

    ON_FAILURE = "on_failure"
    ON_MAJOR_FAILURE = "on_major_failure"
    ON_PLAN_COMPLETE = "on_plan_complete"
    ON_ITERATION_BOUNDARY = "on_iteration_boundary"
    ON_COST_THRESHOLD = "on_cost_threshold"
    ON_EXTERNAL_REQUEST = "on_external_request"


class HumanDecision(Enum):
    APPROVE = "approve"
    REJECT = "reject"
    RETRY = "retry"
    MODIFY = "modify"
    PAUSE = "pause"


def _require(data: Any, key: str, kind: type | tuple[type, ...], record: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{record}: expected a JSON object, got {type(data).__name__}")
    if key not in data:
        raise ValueError(f"{record}: missing key {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        raise ValueError(f"{record}.{key}: expected {kind}, got {type(value).__name__}")
    return value


def with_zone(moment: datetime, timespec: str = "auto") -> str:
    """ISO time with its zone: a naive one is the engine's ``datetime.now()``, local time, so it gets the local zone.

    A reader of the review (and the updates below it, which are UTC) must not have to guess the zone.
    """
    return (moment if moment.tzinfo is not None else moment.astimezone()).isoformat(timespec=timespec)


def _timestamp(data: Any, record: str) -> datetime:
    # decode_datetime returns None only for None, and _require has made sure of a str
    return cast(datetime, decode_datetime(_require(data, "timestamp", str, record), f"{record}.timestamp"))


def _proposal(data: Any, where: str) -> Proposal:
    """A stored request's proposal; its kinds load with the first one, not with every reader of decisions."""
    from .proposal import proposal_from_dict

    return proposal_from_dict(data, where)


def _loads_object(text: str | bytes, record: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{record}: not valid JSON ({exc})") from None


#: state_summary keys shown first, in the tutorial's order, then any others.
_SUMMARY_HEAD = ("iteration", "status", "failures")


@dataclass
class ReviewRequest:
    """One question put to a human; ``cause`` is the reviewed-cause key it settles.

    ``proposal`` is what approving does, when the loop said so
    (``HumanCheckpoint.request_review(reason, details=Proposal(...))``).
    """

    checkpoint_id: str
    trigger: CheckpointTrigger
    state_summary: dict[str, Any] = field(default_factory=dict)
    proposed_action: str = ""
    context: dict[str, Any] = field(default_factory=dict)
    timestamp: datetime = field(default_factory=datetime.now)
    cause: str = ""
    proposal: Proposal | None = None

    def to_dict(self) -> dict[str, Any]:
        where = f"review request {self.checkpoint_id!r}"
        data: dict[str, Any] = {
            "checkpoint_id": self.checkpoint_id,
            "trigger": self.trigger.name,
            "state_summary": json_copy(self.state_summary, f"{where} state_summary"),
            "proposed_action": self.proposed_action,
            "context": json_copy(self.context, f"{where} context"),
            "timestamp": iso_datetime(self.timestamp),
            "cause": self.cause,
        }
        if self.proposal is not None:  # absent, not null: a request without one reads as it always did
            data["proposal"] = self.proposal.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ReviewRequest:
        record = "review request"
        proposal = data.get("proposal") if isinstance(data, dict) else None
        return cls(
            checkpoint_id=_require(data, "checkpoint_id", str, record),
            trigger=decode_enum(CheckpointTrigger, _require(data, "trigger", str, record), f"{record}.trigger"),
            state_summary=dict(_require(data, "state_summary", dict, record)),
            proposed_action=_require(data, "proposed_action", str, record),
            context=dict(_require(data, "context", dict, record)),
            timestamp=_timestamp(data, record),
            cause=_require(data, "cause", str, record) if "cause" in data else "",
            proposal=None if proposal is None else _proposal(proposal, f"{record}.proposal"),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> ReviewRequest:
        return cls.from_dict(_loads_object(text, "review request"))

    def to_markdown(self) -> str:
        """The request as a human reads it in Slack, a GitHub comment or a terminal.

        All text that came from the loop is escaped, so a failure message can
        neither break the layout nor smuggle in HTML (e.g. a fake review marker).
        The proposal, if any, comes after the sections every request has.
        """
        lines = [
            f"# Human Checkpoint: {escape_inline(self.checkpoint_id)}",
            "",
            f"**Triggered by:** {self.trigger.name}",
            f"**Time:** {with_zone(self.timestamp)}",
            f"**Proposed Action:** {escape_inline(self.proposed_action)}",
            "",
            "## State Summary",
            "",
        ]
        tables: list[tuple[str, list[dict[str, Any]]]] = []
        keys = [k for k in _SUMMARY_HEAD if k in self.state_summary]
        keys += [k for k in self.state_summary if k not in _SUMMARY_HEAD]
        for key in keys:
            value = self.state_summary[key]
            if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
                tables.append((key, value))
                continue
            shown = "none" if value == [] else show_value(value)
            lines.append(f"- **{_label(key)}:** {escape_inline(shown)}")
        for key, rows in tables:
            columns: list[str] = []
            for row in rows:
                columns += [k for k in row if k not in columns]
            table = render_table([_title(c) for c in columns], [[row.get(c) for c in columns] for row in rows])
            lines += ["", f"## {_label(key)}", "", *table]
        if self.context:
            lines += ["", "## Context", "", *render_table(["Key", "Value"], [[k, v] for k, v in self.context.items()])]
        if self.proposal is not None:
            lines += ["", *self.proposal.rendered_lines()]
        return "\n".join(lines) + "\n"


@dataclass
class ReviewResponse:
    """A human's answer to one checkpoint; ``modifications`` are JSON values for MODIFY."""

    checkpoint_id: str
    decision: HumanDecision
    feedback: str = ""
    modifications: dict[str, Any] = field(default_factory=dict)
    reviewer: str = ""
    timestamp: datetime = field(default_factory=datetime.now)

    def to_dict(self) -> dict[str, Any]:
        return {
            "checkpoint_id": self.checkpoint_id,
            "decision": self.decision.name,
            "feedback": self.feedback,
            "modifications": json_copy(self.modifications, f"review response {self.checkpoint_id!r} modifications"),
            "reviewer": self.reviewer,
            "timestamp": iso_datetime(self.timestamp),
        }

    @classmethod
    def from_dict(cls, data: Any) -> ReviewResponse:
        record = "review response"
        return cls(
            checkpoint_id=_require(data, "checkpoint_id", str, record),
            decision=decode_enum(HumanDecision, _require(data, "decision", str, record), f"{record}.decision"),
            feedback=_require(data, "feedback", str, record),
            modifications=dict(_require(data, "modifications", dict, record)),
            reviewer=_require(data, "reviewer", str, record),
            timestamp=_timestamp(data, record),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> ReviewResponse:
        return cls.from_dict(_loads_object(text, "review response"))


def _title(key: str) -> str:
    return key.replace("_", " ").title()


def _label(key: str) -> str:
    return escape_inline(_title(key))
