"""loop_engine: plan -> act -> observe -> evaluate -> recover -> terminate.

The public surface of the tutorials. Everything here is importable from the
package and from the submodule the tutorials name (``loop_engine.types``,
``loop_engine.persistence``, ``loop_engine.checkpoint``, ...).

Names load on first use (PEP 562), so importing one light submodule
(``loop_engine.review``, ``loop_engine.types``) does not load the engine,
the gates (jsonschema) and asyncio, which `loopbot status` and `decide`
start without.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - what type checkers and editors see
    from .checkpoint import CheckpointConfig, CheckpointPresets, HumanCheckpoint
    from .components import (
        Actor,
        CallableActor,
        Evaluator,
        ListPlanner,
        MaxIterationsTerminator,
        Observer,
        PassThroughObserver,
        Planner,
        PredicateEvaluator,
        Recovery,
        Terminator,
        Verifier,
    )
    from .config import LoopConfig
    from .engine import LoopEngine
    from .errors import (
        CheckpointError,
        ComponentRegistrationError,
        ConfigurationError,
        CorruptStateError,
        InvalidTransitionError,
        LoopEngineError,
        NoDecisionHandlerError,
        PersistenceError,
        PlanValidationError,
        RunInterrupted,
        SchemaVersionError,
    )
    from .gates import (
        BudgetGate,
        DeterministicGate,
        GateContext,
        GateResult,
        GateRunner,
        LintGate,
        SchemaGate,
        SecurityGate,
        StandardGates,
        SyntaxGate,
        TestGate,
        TypeCheckGate,
    )
    from .persistence import LoopStatePersistence, PersistenceConfig
    from .proposal import ChangeList, Link, Proposal, Table, Text
    from .recovery import (
        BackoffHandler,
        CircuitBreakHandler,
        DefaultRecoveryPolicy,
        GracefulDegradationHandler,
        RecoveryRegistry,
        ReplanStepHandler,
        RequestHumanHandler,
        RetryHandler,
    )
    from .review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
    from .deserialization import state_from_dict
    from .serialization import SCHEMA_VERSION, state_to_dict
    from .state_machine import derive_result_status
    from .types import (
        Budget,
        ComponentType,
        Evaluation,
        ExecutionState,
        Failure,
        FailureStatus,
        FailureType,
        LoopContext,
        LoopResult,
        LoopState,
        LoopStatus,
        Observation,
        Plan,
        RecoveryAction,
        RecoveryStrategy,
        Step,
        StepStatus,
    )

#: submodule -> the public names it defines
_SOURCES: dict[str, tuple[str, ...]] = {
    "checkpoint": ("CheckpointConfig", "CheckpointPresets", "HumanCheckpoint"),
    "components": ("Actor", "CallableActor", "Evaluator", "ListPlanner", "MaxIterationsTerminator", "Observer",
        "PassThroughObserver", "Planner", "PredicateEvaluator", "Recovery", "Terminator", "Verifier"),
    "config": ("LoopConfig",),
    "engine": ("LoopEngine",),
    "errors": ("CheckpointError", "ComponentRegistrationError", "ConfigurationError", "CorruptStateError",
        "InvalidTransitionError", "LoopEngineError", "NoDecisionHandlerError", "PersistenceError",
        "PlanValidationError", "RunInterrupted", "SchemaVersionError"),
    "gates": ("BudgetGate", "DeterministicGate", "GateContext", "GateResult", "GateRunner", "LintGate", "SchemaGate",
        "SecurityGate", "StandardGates", "SyntaxGate", "TestGate", "TypeCheckGate"),
    "persistence": ("LoopStatePersistence", "PersistenceConfig"),
    "proposal": ("ChangeList", "Link", "Proposal", "Table", "Text"),
    "recovery": ("BackoffHandler", "CircuitBreakHandler", "DefaultRecoveryPolicy", "GracefulDegradationHandler",
        "RecoveryRegistry", "ReplanStepHandler", "RequestHumanHandler", "RetryHandler"),
    "review": ("CheckpointTrigger", "HumanDecision", "ReviewRequest", "ReviewResponse"),
    "serialization": ("SCHEMA_VERSION", "state_to_dict"),
    "deserialization": ("state_from_dict",),
    "state_machine": ("derive_result_status",),
    "types": ("Budget", "ComponentType", "Evaluation", "ExecutionState", "Failure", "FailureStatus", "FailureType",
        "LoopContext", "LoopResult", "LoopState", "LoopStatus", "Observation", "Plan", "RecoveryAction",
        "RecoveryStrategy", "Step", "StepStatus"),
}
_WHERE = {name: module for module, names in _SOURCES.items() for name in names}

__version__ = "0.1.0"

__all__ = [
    "Actor", "Budget", "BudgetGate", "BackoffHandler", "CallableActor", "ChangeList", "CheckpointConfig",
    "CheckpointError", "CheckpointPresets", "CheckpointTrigger", "CircuitBreakHandler",
    "ComponentRegistrationError", "ComponentType", "ConfigurationError", "CorruptStateError",
    "DefaultRecoveryPolicy", "DeterministicGate", "Evaluation", "Evaluator", "ExecutionState",
    "Failure", "FailureStatus", "FailureType", "GateContext", "GateResult", "GateRunner",
    "GracefulDegradationHandler", "HumanCheckpoint", "HumanDecision", "InvalidTransitionError",
    "LintGate", "Link", "ListPlanner", "LoopConfig", "LoopContext", "LoopEngine", "LoopEngineError",
    "LoopResult", "LoopState", "LoopStatePersistence", "LoopStatus", "MaxIterationsTerminator",
    "NoDecisionHandlerError", "Observation", "Observer", "PassThroughObserver", "PersistenceConfig",
    "PersistenceError", "Plan", "PlanValidationError", "Planner", "PredicateEvaluator", "Proposal",
    "Recovery", "RecoveryAction", "RecoveryRegistry", "RecoveryStrategy", "ReplanStepHandler",
    "RequestHumanHandler", "RetryHandler", "ReviewRequest", "ReviewResponse", "RunInterrupted",
    "SCHEMA_VERSION", "SchemaGate", "SchemaVersionError", "SecurityGate", "StandardGates", "Step", "StepStatus",
    "SyntaxGate", "Table", "Terminator", "TestGate", "Text", "TypeCheckGate", "Verifier", "derive_result_status",
    "state_from_dict", "state_to_dict",
]


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` when it is first asked for (or the submodule itself)."""
    module = _WHERE.get(name)
    if module is None:
        try:
            return importlib.import_module(f"{__name__}.{name}")  # `loop_engine.engine` without importing it
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
