"""The built-in ``demo`` loop: label a few made-up issues, with a person approving before labels are applied.

It needs no network and no credentials, and it is deterministic: the same
options give the same plan, outputs and review. Four steps run in order -
``collect`` the issues, ``propose`` labels, ``apply`` them, ``report`` -
and once the proposal is made the actor asks the run's checkpoint for a
review (ON_EXTERNAL_REQUEST), so the run pauses exactly once, before
anything is applied. The review carries the proposal as data (a table of
the labels each issue would get, and the list of changes), and the run's
end is worded by ``summarize``. APPROVE applies and completes the run;
REJECT ends it failed with the reviewer's reason; RETRY proposes again and
asks again. A checkpoint that is disabled (``preset: disabled``) lets it run
straight through.

Options: ``items`` (1-100, default 3), the number of issues.
"""

from __future__ import annotations

import re
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import ListPlanner, PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.proposal import ChangeList, Proposal, Table
from loop_engine.types import ComponentType, LoopContext, LoopResult, Observation, Plan, Step

from . import LoopSpec, PatternError

__all__ = ["build", "proposal_of", "summarize", "DemoActor", "STEPS"]

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


def proposal_of(issues: list[dict[str, Any]], proposals: list[dict[str, Any]]) -> Proposal:
    """What approving does: "Approve to apply 3 labels to 3 issues", the table of changes and their list."""
    titles = {issue["number"]: issue["title"] for issue in issues}
    total = sum(len(p["labels"]) for p in proposals)
    rows = [[f"#{p['number']}", titles.get(p["number"], ""), ", ".join(p["labels"])] for p in proposals]
    return Proposal(
        f"Approve to apply {total} labels to {len(proposals)} issues",
        [Table(["Issue", "Title", "Labels to add"], rows, title="Proposed labels"),
         ChangeList([f"#{p['number']}: add {', '.join(p['labels'])}" for p in proposals], title="Changes")],
    )


def summarize(result: LoopResult) -> str:
    """The run's end in words (``LoopSpec.summarize``): what was labelled, or that nothing was."""
    output = result.output if isinstance(result.output, dict) else {}

    def done(kind: str) -> Any:  # the output of step ``kind`` (or of its re-planned copy ``<kind>_r<n>``)
        return next((v for k, v in output.items() if k.split("_r")[0] == kind and isinstance(v, dict)), None)

    report, proposed = done("report"), done("propose")
    if report is not None:
        counts = ", ".join(f"{label} {n}" for label, n in report.get("labels", {}).items())
        return f"{report['summary']}" + (f": {counts}" if counts else "")
    if proposed is not None:
        return f"proposed labels for {len(proposed.get('proposals', []))} issues; none applied"
    return "no labels proposed"


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
                self.checkpoint.request_review(f"apply {total} labels to {len(proposals)} issues",
                                               details=proposal_of(issues, proposals))
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

    return LoopSpec(engine_factory=engine_factory, context_factory=context_factory, summarize=summarize)
