"""A loop of your own, to copy: draft release notes, and ask a person before publishing them.

Copy this file and ``examples/config.yaml`` into one folder, then run
``loopbot check``, ``loopbot run notes`` and ``loopbot decide notes-1 approve``
there (docs/writing-loops.md walks through it). The config names this module
as ``factory: myloops:build``; loopbot looks for ``myloops.py`` in the config
file's folder first, then on PYTHONPATH, then in the installed packages.

The pieces, top to bottom:

- ``build(options)`` - the factory. loopbot calls it with the loop's
  ``options:`` from the config and expects a ``LoopSpec``: two factories,
  not an engine, because a run paused for review may be resumed days later
  in another process, which must build the same engine again.
- ``NotesPlanner``, ``NotesActor``, ``NotesEvaluator`` - the components. The
  actor does each step's work; after drafting it calls
  ``checkpoint.request_review(reason, details=Proposal(...))``, so the run
  stops before ``publish`` and waits for ``loopbot decide``; the proposal
  says, as data, what approving does and shows the draft.
- ``summarize(result)`` - the line people read when a run ends, instead of
  its raw output.
- Everything a step needs from earlier steps is read back from the
  observations (the engine saves them with the run), never from attributes
  on these objects: a resumed run gets brand-new objects.
"""

from __future__ import annotations

from typing import Any

from bot.patterns import LoopSpec, PatternError
from loop_engine.checkpoint import HumanCheckpoint
from loop_engine.components import ListPlanner, PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.proposal import ChangeList, Proposal, Text
from loop_engine.types import ComponentType, Evaluation, LoopContext, LoopResult, Observation, Plan, Step

__all__ = ["build", "summarize", "NotesPlanner", "NotesActor", "NotesEvaluator", "STEPS"]

#: (step id, description), in order.
STEPS: tuple[tuple[str, str], ...] = (
    ("collect", "Collect the changes"),
    ("draft", "Draft the release notes"),
    ("publish", "Publish the notes"),
)

#: The options this loop takes, with their defaults; anything else in ``options:`` is refused by ``loopbot check``.
DEFAULTS: dict[str, Any] = {
    "project": "my project",
    "changes": ["Faster start-up", "A guide to writing your own loop", "Fewer surprises on Ctrl-C"],
    "ask_before_publish": True,
}


class NotesPlanner(ListPlanner):
    """Planner: the same three steps every run, each depending on the one before.

    ``revise_plan`` is ListPlanner's (recovery may re-plan a failed step as a
    copy named ``<id>_r<version>`` with the same metadata), which is why the
    actor dispatches on ``metadata["kind"]`` rather than on the step id.
    """

    def __init__(self) -> None:
        super().__init__([description for _, description in STEPS])

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        steps: list[Step] = []
        for kind, description in STEPS:
            depends = [steps[-1].id] if steps else []
            steps.append(Step(id=kind, description=description, dependencies=depends, metadata={"kind": kind}))
        return Plan(goal=goal, steps=steps, context=dict(initial_context))


def output_of(kind: str, observations: list[Observation]) -> Any:
    """The latest output of the step ``kind`` (or of its re-planned copy ``<kind>_r2``)."""
    for observation in reversed(observations):
        step_id = observation.step_id or ""
        if step_id == kind or step_id.startswith(f"{kind}_r"):
            return observation.content
    raise LookupError(f"no output of step {kind!r} yet")


class NotesActor:
    """Actor: does each step's work and returns its output (a JSON value, so it can be saved).

    ``checkpoint`` is the one loopbot gave the engine (None under ``loopbot
    check`` or in a unit test: then nothing pauses).
    """

    def __init__(self, checkpoint: HumanCheckpoint | None, ask_before_publish: bool) -> None:
        self.checkpoint = checkpoint
        self.ask_before_publish = ask_before_publish

    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        kind = step.metadata.get("kind", step.id)
        inputs = context.initial_context  # the options, as context_factory put them there
        if kind == "collect":
            return {"changes": list(inputs["changes"])}
        if kind == "draft":
            changes = output_of("collect", observations)["changes"]
            text = "\n".join([f"# {inputs['project']}: what's new", ""] + [f"- {change}" for change in changes])
            if self.ask_before_publish and self.checkpoint is not None:
                # The run stops after this step, before "publish", until someone decides. The proposal
                # says what approving does, then shows it: the reviewer reads the draft, not a summary.
                proposal = Proposal(
                    f"Approve to publish the release notes for {inputs['project']}",
                    [Text(text, title="The draft"), ChangeList(changes, title="Changes it lists")],
                )
                self.checkpoint.request_review(f"publish the notes for {inputs['project']}: {'; '.join(changes)}?",
                                               details=proposal)
            return {"notes": text}
        if kind == "publish":
            notes = output_of("draft", observations)["notes"]
            return {"published": notes, "lines": len(notes.splitlines())}
        raise ValueError(f"unknown step {step.id!r}")


class NotesEvaluator:
    """Evaluator: a draft must mention every change; a failing evaluation makes the engine retry the step."""

    def evaluate(self, plan: Plan, observations: list[Observation], goal: str, context: LoopContext) -> Evaluation:
        latest = observations[-1]
        step = plan.get_step(latest.step_id) if latest.step_id else None
        if step is not None and step.metadata.get("kind") == "draft":
            missing = [c for c in context.initial_context["changes"] if c not in latest.content["notes"]]
            if missing:
                return Evaluation(score=0.0, passed=False, feedback=f"draft misses {missing}", step_id=step.id)
        return Evaluation(score=1.0, passed=True, step_id=latest.step_id)


def summarize(result: LoopResult) -> str:
    """How a run ended, in a line (``LoopSpec(summarize=...)``): loopbot shows it instead of the raw output."""
    published = next((v for v in (result.output or {}).values() if isinstance(v, dict) and "published" in v), None)
    if published is not None:
        return f"published the notes ({published['lines']} lines)"
    return "the notes were not published"


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with defaults filled in; PatternError (shown by `loopbot check` as loops[i].options) if wrong."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise PatternError(f"myloops: unknown option(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    merged = {**DEFAULTS, **options}
    changes = merged["changes"]
    if not isinstance(changes, list) or not changes or not all(isinstance(c, str) and c.strip() for c in changes):
        raise PatternError(f"myloops: option changes must be a non-empty list of strings, got {changes!r}")
    if any("\n" in c or "\r" in c for c in changes):
        raise PatternError("myloops: option changes: each change must be one line")
    if not isinstance(merged["ask_before_publish"], bool):
        raise PatternError("myloops: option ask_before_publish must be true or false")
    return merged


def build(options: dict[str, Any]) -> LoopSpec:
    """The factory (``factory: myloops:build``): the loop's ``options:`` in, a LoopSpec out."""
    settings = _options(options)  # refuse bad options here: `loopbot check` reports them before any run

    def engine_factory(*, checkpoint: HumanCheckpoint | None = None, persistence: Any = None) -> LoopEngine:
        # loopbot passes the checkpoint made from the loop's `checkpoint:` block and its own persistence;
        # give both to the engine, and the checkpoint to whichever component asks for reviews.
        engine = LoopEngine(LoopConfig(max_iterations=20), checkpoint=checkpoint, persistence=persistence)
        engine.register_component(ComponentType.PLANNER, NotesPlanner())
        engine.register_component(ComponentType.ACTOR, NotesActor(checkpoint, settings["ask_before_publish"]))
        engine.register_component(ComponentType.OBSERVER, PassThroughObserver())
        engine.register_component(ComponentType.EVALUATOR, NotesEvaluator())
        return engine

    def context_factory() -> LoopContext:
        # What a new run starts from; initial_context must be JSON values (it is saved with the run).
        return LoopContext(
            goal=f"Release notes for {settings['project']}",
            initial_context={"project": settings["project"], "changes": settings["changes"]},
        )

    return LoopSpec(engine_factory=engine_factory, context_factory=context_factory, summarize=summarize)
