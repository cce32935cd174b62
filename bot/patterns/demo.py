"""The built-in ``demo`` loop: label a few made-up issues, with a person approving before labels are applied.

It needs no network and no credentials, and it is deterministic: the same
options give the same plan, outputs and review. Four steps run in order -
``collect`` the issues, ``propose`` labels, ``apply`` them, ``report`` -
and once the proposal is made the actor asks the run's checkpoint for a
review (ON_EXTERNAL_REQUEST), so the run pauses exactly once, before
anything is applied. APPROVE applies and completes the run; REJECT ends it
failed with the reviewer's reason; RETRY proposes again and asks again.
A checkpoint that is disabled (``preset: disabled``) lets it run straight through.

Options: ``items`` (1-100, default 3), the number of issues.
"""

from __future__ import annotations

import re
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import ListPlanner, PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.types import ComponentType, LoopContext, Observation, Plan, Step

from . import LoopSpec, PatternError

__all__ = ["build", "DemoActor", "STEPS"]

#: (step id, description), in order.
STEPS: tuple[tuple[str, str], ...] = (
    ("collect", "Collect open issues"),
    ("propose", "Propose labels"),
    ("apply", "Apply labels"),
    ("report", "Report what was labelled"),
)

_TITLES = (
    "Crash when saving a file with a long name",
    "Add dark mode to the settings page",
    "Docs: the install guide skips the venv step",
    "Slow startup on large projects",
    "Question: how do I run only one loop?",
)
#: Whole-word keyword -> label ("bug" must not match "debug").
_RULES: tuple[tuple[str, str], ...] = (
    ("crash", "bug"), ("error", "bug"), ("slow", "performance"), ("docs", "documentation"),
    ("add", "enhancement"), ("question", "question"),
)
_OPTIONS = {"items": "number of issues to label, 1-100 (default 3)"}


def _labels_for(title: str) -> list[str]:
    words = set(re.findall(r"[a-z]+", title.lower()))
    labels = [label for keyword, label in _RULES if keyword in words]
    return sorted(set(labels)) or ["needs-triage"]


def _output_of(step_id: str, observations: list[Observation]) -> Any:
    """The latest output of ``step_id`` (observations carry step outputs, and survive a restart)."""
    for observation in reversed(observations):
        if observation.step_id == step_id or (observation.step_id or "").startswith(f"{step_id}_r"):
            return observation.content
    raise LookupError(f"demo: no output of step {step_id!r} yet; steps run in order {[s for s, _ in STEPS]}")


class DemoActor:
    """Does each step's (pure) work; after proposing, asks the checkpoint for a review."""

    def __init__(self, checkpoint: HumanCheckpoint | None) -> None:
        self.checkpoint = checkpoint

    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        kind = step.metadata.get("kind", step.id)
        if kind == "collect":
            count = int(context.initial_context["items"])
            return {"issues": [{"number": n, "title": _TITLES[(n - 1) % len(_TITLES)]} for n in range(1, count + 1)]}
        if kind == "propose":
            issues = _output_of("collect", observations)["issues"]
            proposals = [{"number": i["number"], "labels": _labels_for(i["title"])} for i in issues]
            if self.checkpoint is not None:
                total = sum(len(p["labels"]) for p in proposals)
                self.checkpoint.request_review(f"apply {total} labels to {len(proposals)} issues")
            return {"proposals": proposals}
        if kind == "apply":
            proposals = _output_of("propose", observations)["proposals"]
            return {"applied": [{"number": p["number"], "labels": p["labels"]} for p in proposals]}
        if kind == "report":
            applied = _output_of("apply", observations)["applied"]
            counts: dict[str, int] = {}
            for item in applied:
                for label in item["labels"]:
                    counts[label] = counts.get(label, 0) + 1
            return {"summary": f"labelled {len(applied)} issues", "labels": dict(sorted(counts.items()))}
        raise ValueError(f"demo: unknown step {step.id!r}")


class _DemoPlanner(ListPlanner):
    """ListPlanner's order and revision, with readable step ids."""

    def __init__(self) -> None:
        super().__init__([description for _, description in STEPS])

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        plan = super().create_plan(goal, initial_context)
        ids = {f"step_{n}": step_id for n, (step_id, _) in enumerate(STEPS, start=1)}
        for step in plan.steps:
            step.id = ids[step.id]
            step.metadata["kind"] = step.id  # kept by revise_plan's copies (ids "<kind>_r<n>")
            step.dependencies = [ids[d] for d in step.dependencies]
        return plan


def _items(options: dict[str, Any]) -> int:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        known = ", ".join(f"{k} ({v})" for k, v in _OPTIONS.items())
        raise PatternError(f"demo: unknown option(s) {', '.join(unknown)}; known options: {known}")
    items = options.get("items", 3)
    if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= 100:
        raise PatternError(f"demo: option items must be a whole number from 1 to 100, got {items!r}")
    return items


def build(options: dict[str, Any]) -> LoopSpec:
    """The ``demo`` pattern's builder."""
    items = _items(options)

    def engine_factory(*, checkpoint: Any = None, persistence: Any = None) -> LoopEngine:
        if checkpoint is None:
            checkpoint = HumanCheckpoint(CheckpointConfig(save_checkpoints=False))
        engine = LoopEngine(LoopConfig(max_iterations=20), checkpoint=checkpoint, persistence=persistence)
        engine.register_component(ComponentType.PLANNER, _DemoPlanner())
        engine.register_component(ComponentType.ACTOR, DemoActor(checkpoint))
        engine.register_component(ComponentType.OBSERVER, PassThroughObserver())
        return engine

    def context_factory() -> LoopContext:
        return LoopContext(goal=f"Label {items} demo issues", initial_context={"items": items})

    return LoopSpec(engine_factory=engine_factory, context_factory=context_factory)
