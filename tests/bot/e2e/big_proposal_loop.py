"""A ``factory:`` loop for tests whose one review proposes a big table: ``rows`` label changes (default 5,000).

Config: ``factory: tests.bot.e2e.big_proposal_loop:build``, options
``rows``. Its one step asks for a review with a ``Proposal`` holding a
``Table`` of ``rows`` generated changes ("#n", a title, "add P1"), and its
``summarize`` words the run's end, so a test can follow a review too big for
one message from the loop through ``loopbot serve`` to what a person reads.
"""

from __future__ import annotations

from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import ListPlanner, PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.proposal import Proposal, Table
from loop_engine.types import ComponentType, LoopContext, LoopResult, Observation, Step

from bot.patterns import LoopSpec

__all__ = ["build", "row"]


def row(n: int) -> list[str]:
    """The ``n``-th proposed change, as the table and its CSV hold it."""
    return [f"#{n}", f"Crash on start, case {n}", "add P1"]


class _Proposer:
    def __init__(self, checkpoint: HumanCheckpoint, rows: int) -> None:
        self.checkpoint, self.rows = checkpoint, rows

    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        table = Table(["issue", "title", "labels"], [row(n) for n in range(self.rows)], title="Changes")
        proposal = Proposal(f"Approve to apply {self.rows:,} label changes to octo/ops", [table])
        self.checkpoint.request_review(f"apply {self.rows} label changes", details=proposal)
        return {"proposed": self.rows}


def build(options: dict[str, Any]) -> LoopSpec:
    rows = int(options.get("rows", 5000))

    def engine_factory(*, checkpoint: Any = None, persistence: Any = None) -> LoopEngine:
        checkpoint = checkpoint or HumanCheckpoint(CheckpointConfig(save_checkpoints=False))
        engine = LoopEngine(LoopConfig(max_iterations=5), checkpoint=checkpoint, persistence=persistence)
        engine.register_component(ComponentType.PLANNER, ListPlanner(["propose the label changes"]))
        engine.register_component(ComponentType.ACTOR, _Proposer(checkpoint, rows))
        engine.register_component(ComponentType.OBSERVER, PassThroughObserver())
        return engine

    def context_factory() -> LoopContext:
        return LoopContext(goal=f"propose {rows} label changes", initial_context={})

    def summarize(result: LoopResult) -> str:
        return f"Applied {rows:,} label changes to octo/ops"

    return LoopSpec(engine_factory=engine_factory, context_factory=context_factory, summarize=summarize)
