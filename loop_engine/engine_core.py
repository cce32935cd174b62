"""What every part of the engine stands on: its fields and its primitives.

``LoopEngine`` is assembled from layers, each a class that knows the ones
below it and nothing above, so every attribute it uses is declared where
mypy (and a reader) can see it::

    EngineCore                  fields, state-machine moves, clock, saving, stopping
    |-- StepsMixin              one step: gates, act, observe, evaluate, verify
    `-- DecisionsMixin          pausing for a human and applying the answer
        `-- RecoveryMixin       recovering a failure, giving up, escalating
    LoopEngine(StepsMixin, RecoveryMixin)   the driver and the public API
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from .components import call_component
from .config import LoopConfig
from .errors import ConfigurationError
from .gates.base import GateRunner
from .plug_points import CHECKPOINT_ATTRIBUTES, CHECKPOINT_METHODS, PERSISTENCE_METHODS, Checkpoint, Persistence
from .recovery import RecoveryRegistry
from .state_machine import transition
from .types import ComponentType, ExecutionState, Failure, LoopContext, LoopState

__all__ = ["EngineCore", "describe_exception"]

#: Transitions are logged under the public module's name, where users look for them.
logger = logging.getLogger("loop_engine.engine")


def describe_exception(exc: BaseException) -> str:
    """How a component's exception reads in a Failure message or stop reason."""
    return f"{type(exc).__name__}: {exc}"


def _lacking(plugged: object, methods: tuple[str, ...], attributes: tuple[str, ...] = ()) -> list[str]:
    """The attributes and methods of a plug point that ``plugged`` does not have."""
    absent = [name for name in attributes if not hasattr(plugged, name)]
    return absent + [name for name in methods if not callable(getattr(plugged, name, None))]


class EngineCore:
    """The engine's fields, and the moves every layer makes on ``state``."""

    def __init__(
        self,
        config: LoopConfig | None = None,
        *,
        checkpoint: Checkpoint | None = None,
        persistence: Persistence | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        recovery_registry: RecoveryRegistry | None = None,
    ) -> None:
        if config is not None and not isinstance(config, LoopConfig):
            raise ConfigurationError(f"config must be a LoopConfig, got {type(config).__name__}")
        if persistence is not None and _lacking(persistence, PERSISTENCE_METHODS):
            raise ConfigurationError("persistence needs a save(state, trace_id=...) method, e.g. LoopStatePersistence")
        if checkpoint is not None and (missing := _lacking(checkpoint, CHECKPOINT_METHODS, CHECKPOINT_ATTRIBUTES)):
            raise ConfigurationError(
                f"checkpoint {type(checkpoint).__name__} lacks {', '.join(missing)}; "
                "use a HumanCheckpoint or give it what loop_engine.plug_points.Checkpoint lists"
            )
        self._config = config or LoopConfig()
        self._checkpoint = checkpoint
        self._persistence = persistence
        self._sleep = sleep or asyncio.sleep
        self._clock = clock or time.monotonic
        self._rng = rng or random.Random()
        self._registry = recovery_registry or RecoveryRegistry()
        self._components: dict[ComponentType, Any] = {}
        self._pre_gates = GateRunner()
        self._post_gates = GateRunner()
        self._state = LoopState()
        self._clock_mark = 0.0
        self._busy = False

    @property
    def state(self) -> LoopState:
        return self._state

    @property
    def config(self) -> LoopConfig:
        return self._config

    @property
    def checkpoint(self) -> Checkpoint | None:
        return self._checkpoint

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One run at a time: ``state`` is the engine's single run, so a second
        concurrent ``run``/``resume`` would silently take it over."""
        if self._busy:
            raise RuntimeError(
                f"this LoopEngine is still driving run {self._state.trace_id!r}; "
                "create one LoopEngine per concurrent run"
            )
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def _move(self, target: ExecutionState) -> None:
        """The one way the engine changes execution state (checked against the table).

        ``LoopConfig.verbose`` logs every move at INFO instead of DEBUG.
        """
        source = self._state.execution_state
        transition(self._state, target)
        level = logging.INFO if self._config.verbose else logging.DEBUG
        logger.log(level, "run %s: %s -> %s", self._state.trace_id, source.value, target.value)

    def _stop(self, target: ExecutionState, reason: str | None) -> None:
        """End the run in terminal ``target``; retries still awaiting a verdict failed."""
        state = self._state
        state.stop_reason = reason
        state.pending_review = None  # an ended run answers no review
        for action in state.recoveries:
            if action.executed and action.success is None:
                action.success = False  # the retried work never passed
        self._move(target)
        self._tick()
        self._save()

    async def _call(self, kind: ComponentType, method: Callable[..., Any], *args: Any) -> Any:
        """Call a component (sync or async), counting it in ``state.counters[kind.value]``:
        the component call counters a saved state keeps."""
        counters = self._state.counters
        counters[kind.value] = counters.get(kind.value, 0) + 1
        return await call_component(method, *args)

    def _tick(self) -> None:
        """Charge the time since the last tick to the budget (injectable clock)."""
        now = self._clock()
        self._context().budget.time_used += max(0.0, now - self._clock_mark)
        self._clock_mark = now

    def _save(self) -> None:
        if self._persistence is not None:
            self._persistence.save(self._state, trace_id=self._state.trace_id)

    def _context(self) -> LoopContext:
        context = self._state.context
        assert context is not None, "run() or resume() sets the context"
        return context

    def _recovered(self, failure: Failure | None) -> None:
        """``failure`` (if any) is over: it is recovered and its retries awaiting a verdict succeeded."""
        if failure is not None:
            failure.mark_recovered()
            self._settle_recoveries(failure, success=True)

    def _settle_recoveries(self, failure: Failure, *, success: bool) -> None:
        """Give recoveries of ``failure`` still awaiting a verdict (retries) their outcome."""
        for action in self._state.recoveries:
            if action.failure_id == failure.failure_id and action.executed and action.success is None:
                action.success = success
