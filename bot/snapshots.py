"""The snapshot sink: the engine's ``persistence`` for a bot's run, and the two ways it stops one between steps.

Both stops are the engine's ``RunInterrupted`` (the run keeps the place just
saved, never marked failed): ``StoppedForShutdown`` when the bot is going
down, ``ClaimLost`` when another replica may own the run now.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from loop_engine.errors import RunInterrupted
from loop_engine.types import ExecutionState, LoopState

from bot.store.base import Store

__all__ = ["SnapshotSink", "StoppedForShutdown", "ClaimLost"]


class StoppedForShutdown(RunInterrupted):
    """The bot is shutting down: the run stopped right after a save, between steps.

    Raised by ``SnapshotSink.save`` out of the engine, so nothing after the
    save runs; the run stays "running" and the next start continues it from
    the snapshot just written.
    """


class ClaimLost(RunInterrupted):
    """This process lost its claim on the run (replicas: its database session was cut) and wrote nothing more.

    Raised by ``SnapshotSink.save`` before writing: another replica may have
    claimed the run and continued it from its last snapshot, and two writers
    of one run would run its steps twice. The run stays "running" for the
    leader's sweep, which hands it to whichever replica claims it.
    """


#: Saves after which a shutdown may stop a run: a step just finished, or one is about to start.
_STOPPABLE = frozenset({ExecutionState.ITERATION_COMPLETE, ExecutionState.ACTING})


class SnapshotSink:
    """The engine's ``persistence``: every save becomes the run's snapshot in the store.

    When ``stop_requested()`` says the bot is shutting down, a save between
    steps raises ``StoppedForShutdown`` after writing: SIGTERM lets the current
    step finish and be saved, and starts no other. Saves at a pause or at the
    end never raise - those runs are done with the engine anyway.
    """

    def __init__(self, store: Store, run_id: str, stop_requested: Callable[[], bool],
                 state_dir: Path | None = None, claim_held: Callable[[], bool] = lambda: True) -> None:
        self._store = store
        self._run_id = run_id
        self._stop_requested = stop_requested
        self._claim_held = claim_held
        self.run_id = run_id  # public, with state_dir, for components that file what a run made
        self.state_dir = state_dir

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        if not self._claim_held():  # fenced: the run may be another replica's now
            raise ClaimLost(f"run {self._run_id} lost its claim (the database session holding it ended); "
                            "the replica that claims it next continues it from its last snapshot")
        self._store.save_state(self._run_id, state)  # the engine's own encoder: no dict round trip
        if state.execution_state in _STOPPABLE and self._stop_requested():
            raise StoppedForShutdown(f"run {self._run_id} stopped at {state.execution_state.value} for shutdown")
