"""Which loop does a config entry mean? Built-in patterns by name, or a ``module:callable`` factory.

A builder takes the loop's ``options`` and returns a ``LoopSpec``: two
factories rather than one engine, because a run is resumed in whatever
process is alive when its decision arrives, and that process must build a
fresh engine with the same components. The runner passes each new engine
its ``checkpoint`` and ``persistence`` by keyword. A spec may also word
how a run ended (``summarize``), which the bot shows instead of the output.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from loop_engine.types import LoopContext, LoopResult

from adapters.suggest import did_you_mean

if TYPE_CHECKING:  # pragma: no cover - typing only
    from loop_engine.engine import LoopEngine

__all__ = [
    "LoopSpec",
    "EngineFactory",
    "PatternBuilder",
    "PatternError",
    "UnknownPatternError",
    "FactoryError",
    "get_pattern",
    "register_pattern",
    "available_patterns",
    "load_factory",
]


class EngineFactory(Protocol):
    def __call__(self, *, checkpoint: Any = None, persistence: Any = None) -> LoopEngine:
        """A new engine with every component registered, using ``checkpoint`` and ``persistence`` when given."""
        ...


@dataclass(frozen=True)
class LoopSpec:
    """How to build a loop: a fresh engine each time, and the context a new run starts from.

    ``summarize(result)``, if given, is the one line a person reads when a
    run ends ("labelled 3 issues: bug 1, ...") - in the review thread, the
    run's file and ``status`` - instead of its raw output.
    """

    engine_factory: EngineFactory
    context_factory: Callable[[], LoopContext]
    summarize: Callable[[LoopResult], str] | None = None


PatternBuilder = Callable[[dict[str, Any]], LoopSpec]


class PatternError(ValueError):
    """A pattern or factory named in the config cannot be used; the message says why and what would work."""


class UnknownPatternError(PatternError, LookupError):
    """No pattern is registered under the name."""


class FactoryError(PatternError):
    """A ``module:callable`` factory cannot be loaded."""


#: Built-ins, imported on first use so the registry does not load every engine module.
_BUILTINS: dict[str, str] = {"demo": "bot.patterns.demo:build", "daily-triage": "bot.patterns.triage:build"}
_registry: dict[str, PatternBuilder] = {}
_lock = threading.Lock()
_NAME = re.compile(r"\A[a-z0-9][a-z0-9_-]*\Z")
_REFERENCE = re.compile(r"\A(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_][\w.]*)\Z")


def available_patterns() -> list[str]:
    with _lock:
        return sorted({*_BUILTINS, *_registry})


def register_pattern(name: str, builder: PatternBuilder) -> None:
    """Make ``builder`` available as ``pattern: name``; a name is registered once."""
    if not _NAME.match(name):
        raise PatternError(f"pattern name {name!r} must be lower-case letters, digits, '-' or '_'")
    if not callable(builder):
        raise PatternError(f"pattern {name!r}: the builder must be callable, got {type(builder).__name__}")
    with _lock:
        if name in _registry or name in _BUILTINS:
            raise PatternError(f"pattern {name!r} is already registered; choose another name")
        _registry[name] = builder


def get_pattern(name: str) -> PatternBuilder:
    with _lock:
        builder = _registry.get(name)
        reference = _BUILTINS.get(name)
    if builder is not None:
        return builder
    if reference is not None:
        return load_factory(reference)
    known = available_patterns()
    hint = did_you_mean(name, known)
    raise UnknownPatternError(f'unknown pattern "{name}"{hint or "."} Known patterns: {", ".join(known)}')


def load_factory(reference: str) -> PatternBuilder:
    """Resolve ``"pkg.mod:build"`` to the callable; each failure gets its own message."""
    match = _REFERENCE.match(reference.strip())
    if match is None:
        raise FactoryError(f'factory "{reference}" must look like "package.module:callable"')
    module_name, attr_path = match.group("module"), match.group("attr")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise FactoryError(
                f'cannot import {module_name}: module "{exc.name}" not found; is it installed or on PYTHONPATH?'
            ) from exc
        # the module exists but one of its own imports is missing: name that one
        raise FactoryError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # the module's own code failed (SyntaxError, an error at import): user code
        raise FactoryError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise FactoryError(
                f'factory "{reference}": module "{module_name}" has no attribute "{attr_path}"'
            ) from None
    if not callable(target):
        raise FactoryError(f'factory "{reference}" is a {type(target).__name__}, not a callable taking options')
    return target
