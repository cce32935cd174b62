"""Reference-compatible import path: ``from loop_engine.core import LoopEngine, LoopConfig``."""

from .config import LoopConfig
from .engine import LoopEngine
from .types import LoopState

__all__ = ["LoopEngine", "LoopConfig", "LoopState"]
