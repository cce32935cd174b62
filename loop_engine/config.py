"""How a loop engine is tuned: ``LoopConfig``, validated when it is built.

A bad value fails at construction with the field's name, not deep inside a
run where the cause is hard to see.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .errors import ConfigurationError

__all__ = ["LoopConfig"]

_AT_LEAST_ONE = ("max_iterations", "circuit_breaker_threshold")
_AT_LEAST_ZERO = ("max_recovery_attempts", "backoff_base_seconds", "backoff_max_seconds")


@dataclass
class LoopConfig:
    """Limits and switches of one engine (reference names and defaults).

    ``verbose`` logs every state transition at INFO on the
    ``loop_engine.engine`` logger (DEBUG otherwise); the library never
    configures logging itself, so the application decides where it goes.
    """

    max_iterations: int = 100
    max_recovery_attempts: int = 3
    enable_planner: bool = True
    enable_observer: bool = True
    enable_evaluator: bool = True
    enable_recovery: bool = True
    enable_verification: bool = False
    verbose: bool = False
    circuit_breaker_threshold: int = 5
    backoff_base_seconds: float = 1.0
    backoff_max_seconds: float = 60.0
    backoff_jitter: float = 0.1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Checked when built and again when a run starts, so a field changed since is caught too."""
        for item in fields(self):
            value = getattr(self, item.name)
            if item.type in ("bool",) and not isinstance(value, bool):
                raise ConfigurationError(f"LoopConfig.{item.name} must be True or False, got {value!r}")
            if item.type == "int" and (isinstance(value, bool) or not isinstance(value, int)):
                raise ConfigurationError(f"LoopConfig.{item.name} must be a whole number (int), got {value!r}")
            if item.type == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigurationError(f"LoopConfig.{item.name} must be a number, got {value!r}")
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ConfigurationError(
                    f"LoopConfig.{name}={getattr(self, name)!r} cannot work; use {name} >= 1"
                )
        for name in _AT_LEAST_ZERO:
            if getattr(self, name) < 0:
                raise ConfigurationError(
                    f"LoopConfig.{name}={getattr(self, name)!r} cannot be negative; use {name} >= 0"
                )
        if not 0 <= self.backoff_jitter <= 1:
            raise ConfigurationError(
                f"LoopConfig.backoff_jitter={self.backoff_jitter!r} is a fraction; use a value between 0 and 1"
            )
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ConfigurationError(
                f"LoopConfig.backoff_max_seconds={self.backoff_max_seconds!r} is below "
                f"backoff_base_seconds={self.backoff_base_seconds!r}; raise the maximum or lower the base"
            )
