"""What do the Reject and Modify modals ask, and what command does a submission make?

A reject needs a reason and a modify needs changes the engine accepts; both
are checked here, before a vote exists, with the one grammar of
``adapters.commands``. A problem goes back into the modal under the field
(``response_action: errors``) instead of becoming a refused vote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapters.command_error import CommandError
from adapters.commands import Command, parse_command
from adapters.modify_changes import modification_problem, parse_assignments
from loop_engine.checkpoint import HumanDecision

__all__ = ["MAX_ERROR", "MODAL_CALLBACKS", "ModalContext", "build_modal", "command_from_submission", "FIELD_BLOCK"]

#: callback_id -> the decision its modal asks for.
MODAL_CALLBACKS = {"loopbot_reject": HumanDecision.REJECT, "loopbot_modify": HumanDecision.MODIFY}
#: The input block holding the reason / the changes; errors are keyed by it.
FIELD_BLOCK = {HumanDecision.REJECT: "reason", HumanDecision.MODIFY: "changes"}
_FIELD_ACTION = "value"
#: The longest error shown under a modal's field.
MAX_ERROR = 1500

_PROMPTS = {
    HumanDecision.REJECT: ("Reject", "Why reject? (the run ends; the reason goes into its log)", ""),
    HumanDecision.MODIFY: (
        "Modify",
        "Changes, one key=value per line",
        'e.g. context.limit=5\nstep.description=Label only bugs\nplan.skip=["apply"]\n'
        "(or one JSON object)",
    ),
}


@dataclass(frozen=True)
class ModalContext:
    """Where the button was clicked, carried through the modal in ``private_metadata``."""

    review_id: str
    channel: str = ""
    message_ts: str = ""
    thread_ts: str = ""
    response_url: str = ""

    def to_metadata(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def from_metadata(cls, raw: str) -> ModalContext:
        """The context ``to_metadata`` wrote; ValueError for details loopbot did not write (no review, not ours)."""
        data = json.loads(raw)  # JSONDecodeError is a ValueError
        if not isinstance(data, dict) or not set(data) <= set(cls.__dataclass_fields__):
            raise ValueError("private_metadata is not a review's details as loopbot writes them")
        if not all(isinstance(value, str) for value in data.values()) or not data.get("review_id"):
            raise ValueError("private_metadata names no review")
        return cls(**data)


def build_modal(decision: HumanDecision, context: ModalContext) -> dict[str, Any]:
    """The view for ``views.open``; ``callback_id`` routes its submission back."""
    verb, label, hint = _PROMPTS[decision]
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": _FIELD_ACTION, "multiline": True}
    block: dict[str, Any] = {
        "type": "input",
        "block_id": FIELD_BLOCK[decision],
        "label": {"type": "plain_text", "text": label},
        "element": element,
    }
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint}
    callback = next(cid for cid, wanted in MODAL_CALLBACKS.items() if wanted is decision)
    return {
        "type": "modal",
        "callback_id": callback,
        "private_metadata": context.to_metadata(),
        "title": {"type": "plain_text", "text": f"{verb} {context.review_id}"[:24]},
        "submit": {"type": "plain_text", "text": verb},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [block],
    }


def submitted_text(view: dict[str, Any], decision: HumanDecision) -> str:
    values = ((view.get("state") or {}).get("values") or {}).get(FIELD_BLOCK[decision]) or {}
    return str((values.get(_FIELD_ACTION) or {}).get("value") or "")


def _modifications(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if stripped.startswith("{"):
        stripped = f"```json\n{stripped}\n```"
    if stripped.startswith(("```", "~~~")):
        command = parse_command(f"modify {stripped}")
        if isinstance(command, CommandError):
            raise command
        return command.modifications
    tokens = [line.strip() for line in stripped.splitlines() if line.strip()]
    if not tokens:
        raise CommandError("give at least one change, e.g. context.KEY=VALUE")
    modifications = parse_assignments(tokens)
    problem = modification_problem(modifications)
    if problem is not None:
        raise CommandError(problem)
    return modifications


def command_from_submission(decision: HumanDecision, review_id: str, text: str) -> Command:
    """The command a submitted modal makes; CommandError (its message fits under the field) if it is not valid."""
    try:
        if decision is HumanDecision.REJECT:
            command = parse_command(f"reject {review_id} {text.strip()}")
            if isinstance(command, CommandError):
                raise command
            return command
        return Command(decision, review_id, text.strip(), _modifications(text))
    except CommandError as exc:
        message = str(exc).split("\nCommands (case-insensitive):")[0]
        raise CommandError(message[:MAX_ERROR]) from None
