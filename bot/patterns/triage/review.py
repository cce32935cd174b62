"""What a reviewer and the gate allow triage: the actions and labels, and a MODIFY's ``skip`` and ``label.#N``.

The gate refuses before each step any action but adding labels from the
configured set and commenting. A reviewer's MODIFY (``skip=#12,#15
label.#12=P1``, or the same under ``context.``) is read from the run's
context by ``modifications``; ``modification_problem`` is asked when the
vote is cast, so a label outside the set is refused to the voter then.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loop_engine.gates.base import DeterministicGate, GateContext, GateResult

from .rules import Rules

__all__ = ["ALLOWED_ACTIONS", "REFUSED_ACTIONS", "AllowedActionsGate", "modification_problem", "modifications"]

#: What a triage step may do. Everything else - close, merge, remove a label, ... - is refused by the gate.
ALLOWED_ACTIONS = ("read", "propose", "report", "add_labels", "comment")
REFUSED_ACTIONS = ("close", "merge", "remove_label", "remove_labels", "set_labels", "lock", "delete")


class AllowedActionsGate(DeterministicGate):
    """Before each step: its action is one triage may take, and labels come from the configured set."""

    name = "triage-allowed-actions"

    def __init__(self, allowed_labels: Sequence[str]) -> None:
        super().__init__()
        self.allowed_labels = list(allowed_labels)

    def problem(self, action: Any, labels: Any = None) -> str | None:
        if action in REFUSED_ACTIONS:
            return f"triage never does {action!r}; it only adds labels from its set and comments"
        if action not in ALLOWED_ACTIONS:
            return f"unknown action {action!r}; triage may only {', '.join(ALLOWED_ACTIONS)}"
        if action == "add_labels":
            if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
                return f"add_labels needs a non-empty list of label names, got {labels!r}"
            outside = [x for x in labels if x not in self.allowed_labels]
            if outside:
                return f"label(s) {', '.join(outside)} not in the configured set ({', '.join(self.allowed_labels)})"
        return None

    def check(self, context: GateContext) -> GateResult:
        metadata = context.metadata or {}
        problem = self.problem(metadata.get("action"), metadata.get("labels"))
        if problem is not None:
            return self.result(False, problem, action=metadata.get("action"))
        return self.result(True, "allowed", action=metadata.get("action"))


def _numbers(value: Any) -> set[int]:
    """``"#12,#15"``, ``[12, "#15"]``, ``12`` -> {12, 15}."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return set().union(*(_numbers(v) for v in value)) if value else set()
    return {int(n) for n in re.findall(r"\d+", str(value or ""))}


def _label_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in str(value).split(",") if part.strip()]


def modifications(context: Mapping[str, Any]) -> tuple[set[int], dict[int, list[str]]]:
    """The reviewer's MODIFY, as merged into the run's context: (numbers to skip, number -> labels)."""
    skip = _numbers(context.get("skip"))
    raw = context.get("label") or {}
    overrides: dict[int, list[str]] = {}
    if isinstance(raw, dict):
        for key, value in raw.items():
            for number in _numbers(key):
                overrides[number] = _label_list(value)
    return skip, overrides


def modification_problem(changes: Mapping[str, Any], rules: Rules) -> str | None:
    """Why a MODIFY's ``skip`` / ``label.#N`` cannot apply (``LoopSpec.modification_problem``), else None.

    Asked when the vote is cast, so a label outside the configured set is
    refused to the voter, naming the allowed ones, not dropped after the decision.
    """
    context = changes.get("context")
    if not isinstance(context, Mapping):
        return None
    allowed = ", ".join(rules.allowed_labels)
    if "skip" in context and not _numbers(context["skip"]):
        return f"skip names no issue numbers (e.g. skip=#12,#15), got {str(context['skip'])[:80]!r}"
    raw = context.get("label")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return f"label takes an issue after it: label.#12=P1 (labels: {allowed})"
    for key, value in raw.items():
        if not _numbers(key):
            return f"label.{key}: name an issue, e.g. label.#12=P1"
        labels = _label_list(value)
        outside = [label for label in labels if label not in rules.allowed_labels]
        if not labels or outside:
            what = f"{', '.join(outside)} is not a label daily-triage adds" if outside else "no label given"
            return f"label.{key}: {what}; the labels it may add: {allowed}"
    return None
