"""What the engine asks of the objects plugged into it: a checkpoint and a persistence.

``HumanCheckpoint`` and ``LoopStatePersistence`` are the library's own; a
host brings its own (the bot saves snapshots into its store) by having these
methods. The engine checks for them when it is built, so a wrong object is
named at once rather than failing mid-run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from .checkpoint_config import CheckpointConfig
from .review import CheckpointTrigger, ReviewRequest, ReviewResponse
from .types import Failure, LoopState

__all__ = [
    "Checkpoint", "DecisionHandler", "Persistence",
    "CHECKPOINT_ATTRIBUTES", "CHECKPOINT_METHODS", "PERSISTENCE_METHODS",
]

#: Called with the request; returns the response, or an awaitable of it.
DecisionHandler = Callable[[ReviewRequest], ReviewResponse | Awaitable[ReviewResponse]]


class Checkpoint(Protocol):
    """Decides when a run asks a human, opens the review, and records the answer."""

    @property
    def config(self) -> CheckpointConfig: ...

    @property
    def decision_handler(self) -> DecisionHandler | None:
        """None: the run stops in WAITING_FOR_HUMAN and is answered later with ``resume``."""
        ...

    def should_pause(self, state: LoopState) -> CheckpointTrigger | None: ...

    def present_for_review(
        self,
        state: LoopState,
        trigger: CheckpointTrigger,
        proposed_action: str = ...,
        *,
        failure: Failure | None = None,
    ) -> ReviewRequest:
        """Open the review on ``state`` (``pending_review``) and mark its cause reviewed."""
        ...

    def refresh_record(self, request: ReviewRequest) -> None:
        """The request changed once the run showed as waiting; rewrite whatever was kept of it."""
        ...

    async def await_decision(self, request: ReviewRequest) -> ReviewResponse: ...

    def record_decision(self, state: LoopState, response: ReviewResponse) -> None:
        """Append ``response`` to ``state.decisions``; close the open review unless it is PAUSE."""
        ...


class Persistence(Protocol):
    """Where the engine saves the run's state after every move that matters."""

    def save(self, state: LoopState, trace_id: str | None = None) -> object: ...


#: What the engine looks for when it is built (tests/loop_engine/test_plug_points.py holds them to the protocols).
CHECKPOINT_ATTRIBUTES = ("config", "decision_handler")
CHECKPOINT_METHODS = ("should_pause", "present_for_review", "refresh_record", "await_decision", "record_decision")
PERSISTENCE_METHODS = ("save",)
