"""loop_engine: plan -> act -> observe -> evaluate -> recover -> terminate.

The public surface of the tutorials. Everything here is importable from the
package and from the submodule the tutorials name (``loop_engine.types``,
``loop_engine.persistence``, ``loop_engine.checkpoint``, ...).
"""

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
from .serialization import SCHEMA_VERSION, state_from_dict, state_to_dict
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

__version__ = "0.1.0"

__all__ = [
    "Actor", "Budget", "BudgetGate", "BackoffHandler", "CallableActor", "CheckpointConfig",
    "CheckpointError", "CheckpointPresets", "CheckpointTrigger", "CircuitBreakHandler",
    "ComponentRegistrationError", "ComponentType", "ConfigurationError", "CorruptStateError",
    "DefaultRecoveryPolicy", "DeterministicGate", "Evaluation", "Evaluator", "ExecutionState",
    "Failure", "FailureStatus", "FailureType", "GateContext", "GateResult", "GateRunner",
    "GracefulDegradationHandler", "HumanCheckpoint", "HumanDecision", "InvalidTransitionError",
    "LintGate", "ListPlanner", "LoopConfig", "LoopContext", "LoopEngine", "LoopEngineError",
    "LoopResult", "LoopState", "LoopStatePersistence", "LoopStatus", "MaxIterationsTerminator",
    "NoDecisionHandlerError", "Observation", "Observer", "PassThroughObserver", "PersistenceConfig",
    "PersistenceError", "Plan", "PlanValidationError", "Planner", "PredicateEvaluator",
    "Recovery", "RecoveryAction", "RecoveryRegistry", "RecoveryStrategy", "ReplanStepHandler",
    "RequestHumanHandler", "RetryHandler", "ReviewRequest", "ReviewResponse", "RunInterrupted",
    "SCHEMA_VERSION", "SchemaGate", "SchemaVersionError", "SecurityGate", "StandardGates", "Step", "StepStatus",
    "SyntaxGate", "Terminator", "TestGate", "TypeCheckGate", "Verifier", "derive_result_status",
    "state_from_dict", "state_to_dict",
]
