"""Which checkpoint triggers are on: ``CheckpointConfig`` and its named presets.

Apart from ``loop_engine.checkpoint`` (which re-exports both) so that
checking a checkpoint config - as a bot does when it reads its config file,
running no loop - loads no persistence or state types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigurationError

__all__ = ["CheckpointConfig", "CheckpointPresets"]


@dataclass
class CheckpointConfig:
    """Which triggers are on, and where presented requests are written.

    ``trigger_every_n_iterations`` fires at iterations n, 2n, ... (never 0);
    ``trigger_cost_threshold`` fires once when ``context.budget.cost_used``
    reaches it. External requests (``request_review``) work whenever
    ``enabled`` is true.
    """

    enabled: bool = True
    trigger_on_failure: bool = False
    trigger_on_major_failure: bool = True
    trigger_on_plan_complete: bool = False
    trigger_every_n_iterations: int | None = None
    trigger_cost_threshold: float | None = None
    save_checkpoints: bool = True
    checkpoint_dir: str | Path = ".loop_checkpoints"

    def __post_init__(self) -> None:
        n = self.trigger_every_n_iterations
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigurationError(f"trigger_every_n_iterations must be a positive int or None, got {n!r}")
        cost = self.trigger_cost_threshold
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
            raise ConfigurationError(f"trigger_cost_threshold must be a number >= 0 or None, got {cost!r}")
        self.checkpoint_dir = Path(self.checkpoint_dir)


class CheckpointPresets:
    """Named configurations; each returns a fresh ``CheckpointConfig``."""

    @staticmethod
    def manual_only() -> CheckpointConfig:
        """Stop only when someone calls ``request_review``."""
        return CheckpointConfig(trigger_on_major_failure=False)

    @staticmethod
    def conservative() -> CheckpointConfig:
        """Ask on every unrecovered failure and before declaring a plan done."""
        return CheckpointConfig(trigger_on_failure=True, trigger_on_major_failure=True, trigger_on_plan_complete=True)

    @staticmethod
    def production(cost_threshold: float | None = None) -> CheckpointConfig:
        """Run unattended; ask only when a failure would end the run (or spend passes a limit)."""
        return CheckpointConfig(trigger_on_major_failure=True, trigger_cost_threshold=cost_threshold)

    @staticmethod
    def disabled() -> CheckpointConfig:
        return CheckpointConfig(enabled=False, save_checkpoints=False)
