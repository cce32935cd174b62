"""The error hierarchy of loop_engine.

Every error the library raises on purpose derives from ``LoopEngineError`` so
that callers can catch the library's refusals without catching their own bugs.
Messages say what is wrong *and* what to do about it.
"""

from __future__ import annotations

__all__ = [
    "LoopEngineError",
    "ConfigurationError",
    "ComponentRegistrationError",
    "InvalidTransitionError",
    "PlanValidationError",
    "PersistenceError",
    "CorruptStateError",
    "SchemaVersionError",
    "CheckpointError",
    "NoDecisionHandlerError",
    "RunInterrupted",
]


class LoopEngineError(Exception):
    """Base class for every deliberate refusal of the library."""


class ConfigurationError(LoopEngineError, ValueError):
    """A configuration value cannot work (e.g. ``max_iterations=0``)."""


class ComponentRegistrationError(LoopEngineError, TypeError):
    """``register_component`` was given something it cannot use."""


class InvalidTransitionError(LoopEngineError, RuntimeError):
    """The engine attempted a state change the transition table forbids."""

    def __init__(self, source: object, target: object, table_name: str = "execution") -> None:
        self.source = source
        self.target = target
        super().__init__(
            f"invalid {table_name} transition {source!r} -> {target!r}; "
            "this is a bug in the engine or in code that mutates LoopState directly"
        )


class PlanValidationError(LoopEngineError, ValueError):
    """A plan is malformed (unknown dependency ids, duplicate step ids, ...)."""


class PersistenceError(LoopEngineError):
    """Saving or loading a loop state failed."""


class CorruptStateError(PersistenceError, ValueError):
    """A stored state file is truncated or not a state document."""


class SchemaVersionError(PersistenceError, ValueError):
    """A stored state was written by a newer schema than this library reads."""


class CheckpointError(LoopEngineError):
    """A human checkpoint cannot proceed as asked."""


class NoDecisionHandlerError(CheckpointError, RuntimeError):
    """``await_decision`` was called with no way to ask a human."""


class RunInterrupted(LoopEngineError):
    """Raise from ``persistence.save`` to stop a run where it stands without ending it.

    The engine lets it through untouched: the run keeps the place just saved
    (never marked FAILED), and ``resume(state)`` continues it from there - the
    way a service stops its runs between steps when it shuts down.
    """
