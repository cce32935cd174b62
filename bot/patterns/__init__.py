"""Which loop does a config entry mean? Built-in patterns by name, or a ``module:callable`` factory.

A builder takes the loop's ``options`` and returns a ``LoopSpec``: two
factories rather than one engine, because a run is resumed in whatever
process is alive when its decision arrives, and that process must build a
fresh engine with the same components. The runner passes each new engine
its ``checkpoint`` and ``persistence`` by keyword. A spec may also word
how a run ended (``summarize``), which the bot shows instead of the output,
refuse a MODIFY when the vote is cast (``modification_problem``) and check
the connection its runs will use (``check_connection``, `loopbot check`).

A builder that takes a keyword ``context`` is given a ``BuildContext``: what
the bot knows that a loop may need - its ``github:`` connection and the
issues its reviews are posted on - passed in, never read from a global.
"""

from __future__ import annotations

import importlib
import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from loop_engine.types import LoopContext, LoopResult

from adapters.suggest import did_you_mean

if TYPE_CHECKING:  # pragma: no cover - typing only
    from loop_engine.engine import LoopEngine
    from loop_engine.plug_points import Checkpoint, Persistence

    from adapters.github.client import GitHubClient

__all__ = [
    "BuildContext",
    "GitHubConnection",
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
    "build_spec",
]


class EngineFactory(Protocol):
    def __call__(self, *, checkpoint: Checkpoint | None = None, persistence: Persistence | None = None) -> LoopEngine:
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
    #: Why a MODIFY's changes (as voted: ``{"context": {...}, ...}``) cannot apply to this loop, else None;
    #: asked when the vote is cast, so a change the loop would drop is refused to the voter instead.
    modification_problem: Callable[[dict[str, Any]], str | None] | None = None
    #: What the loop's own connection is, asked online by `loopbot check`; raises (ChannelError) when it fails.
    check_connection: Callable[[], str] | None = None


@dataclass(frozen=True)
class GitHubConnection:
    """The bot's ``github:`` block as a loop may use it: where, and a token or an App installation.

    Secrets are left out of ``repr`` so that a logged context shows none.
    """

    base_url: str
    token: str | None = field(default=None, repr=False)
    app_id: int | None = None
    private_key: str | None = field(default=None, repr=False)
    installation_id: int | None = None

    @property
    def problem(self) -> str | None:
        """Why no client can be made (no token, an incomplete App), else None."""
        if self.token:
            return None
        if self.app_id is not None and self.private_key and self.installation_id is not None:
            return None
        return "the github: block has neither a token nor app_id + private_key + installation_id"

    @property
    def auth(self) -> str:
        return "token" if self.token else "GitHub App installation"

    def client(self) -> GitHubClient:
        from adapters.github.client import make_client  # here: building a registry entry needs no HTTP stack

        return make_client(self.base_url, token=self.token, app_id=self.app_id, private_key=self.private_key,
                           installation_id=self.installation_id)


@dataclass(frozen=True)
class BuildContext:
    """What the bot passes a builder that asks for it (a keyword ``context``).

    ``review_issues``: where this loop's reviews go on GitHub, as
    (repository, issue) - issue None for one issue per run, opened by loopbot.
    """

    github: GitHubConnection | None = None
    review_issues: tuple[tuple[str, int | None], ...] = ()


PatternBuilder = Callable[..., LoopSpec]


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


def build_spec(builder: PatternBuilder, options: dict[str, Any], context: BuildContext | None = None) -> Any:
    """``builder(options)``, and ``context=`` too when the builder takes it (older factories take options only)."""
    try:
        takes = "context" in inspect.signature(builder).parameters
    except (TypeError, ValueError):  # a callable without a signature (a C builtin): options only
        takes = False
    if takes:
        return builder(options, context=context or BuildContext())
    return builder(options)
