"""The configured loops, resolved to their builders: which loops exist, and how an engine for one is made.

Each loop's pattern or factory is resolved once; every new engine gets the
run's snapshot sink (``bot.snapshots``) and a ``HumanCheckpoint`` without a
decision handler, so a checkpoint stops the run instead of blocking a
thread. A loop that cannot be built is reported naming its config key.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.engine import LoopEngine
from loop_engine.types import LoopContext, LoopResult

from adapters.suggest import did_you_mean

from bot.config import BotConfig, LoopBlock
from bot.factory_import import import_problem, search_first
from bot.patterns import BuildContext, GitHubConnection, LoopSpec, PatternError, build_spec, get_pattern, load_factory
from bot.snapshots import SnapshotSink
from bot.store.base import Store

__all__ = ["UnknownLoopError", "LoopBuildError", "LoopCatalog", "build_context", "checkpoint_config_for"]

_T = TypeVar("_T")
log = logging.getLogger(__name__)


class UnknownLoopError(LookupError):
    """A loop name that the config does not define."""

    def __init__(self, name: str, known: list[str]) -> None:
        hint = did_you_mean(name, known)
        listing = ", ".join(known) if known else "(none: add one under loops: in the config)"
        super().__init__(f'unknown loop "{name}"{hint or "."} Loops in the config: {listing}')
        self.name = name


class LoopBuildError(Exception):
    """A configured loop cannot be built: its pattern is unknown, its factory won't load, or its builder refused.

    ``key`` is the loop's config key at fault (``pattern``, ``factory`` or
    ``options``), so `loopbot check` reports it like any other config error;
    ``expected`` is False when the builder itself crashed (a bug worth a traceback).
    """

    def __init__(self, loop: str, key: str, problem: str, *, expected: bool = True) -> None:
        super().__init__(f"cannot build loop {loop}: {problem}")
        self.loop = loop
        self.key = key
        self.problem = problem
        self.expected = expected


def checkpoint_config_for(loop: LoopBlock, state_dir: Path) -> CheckpointConfig:
    """The loop's ``checkpoint`` block (a preset and/or fields); records go under ``state_dir``.

    Without a block the engine's defaults apply (ask when a failure would end
    the run). The request files land in ``state_dir/checkpoints`` unless the
    block names a ``checkpoint_dir``: never in whatever directory serve was started from.
    """
    block = loop.checkpoint
    config = block.to_checkpoint_config() if block is not None else CheckpointConfig()
    if block is None or "checkpoint_dir" not in (block.model_extra or {}):
        config.checkpoint_dir = Path(state_dir) / "checkpoints"
    return config


@dataclass
class _Loop:
    """A loop's config and its resolved spec; engines and contexts are checked as they are made.

    A factory that returns the wrong thing fails here, naming the loop's key,
    instead of as an AttributeError somewhere inside a run.
    """

    config: LoopBlock
    spec: LoopSpec

    def _made(self, what: str, make: Callable[[], object], kind: type[_T]) -> _T:
        key, source = _source(self.config)
        try:
            made = make()
        except Exception as err:  # user code crashed: whatever it raised, the loop cannot be built
            problem = f"{source}: {what} raised {type(err).__name__}: {err}"
            raise LoopBuildError(self.config.name, key, problem, expected=False) from err
        if not isinstance(made, kind):
            problem = f"{source}: {what} returned {type(made).__name__}, not a {kind.__name__}"
            raise LoopBuildError(self.config.name, key, problem)
        return made

    def engine(self, *, checkpoint: HumanCheckpoint | None, persistence: SnapshotSink | None) -> LoopEngine:
        factory = self.spec.engine_factory
        return self._made("engine_factory", lambda: factory(checkpoint=checkpoint, persistence=persistence), LoopEngine)

    def context(self) -> LoopContext:
        return self._made("context_factory", self.spec.context_factory, LoopContext)


class LoopCatalog:
    """The configured loops, resolved to their pattern/factory builders once."""

    def __init__(self, config: BotConfig, config_dir: str | os.PathLike[str] | None = None) -> None:
        """``config_dir``: the config file's folder, searched first for ``factory: module:callable``.

        A newcomer keeps ``myloops.py`` next to ``config.yaml`` and expects it
        to be found without setting PYTHONPATH. None (the default, for callers
        that have no file) searches only the usual import path.
        """
        self._config = config
        self._state_dir = Path(config.state_dir)
        self._config_dir = Path(config_dir).resolve() if config_dir is not None else None
        self._loops: dict[str, _Loop] = {}

    @property
    def names(self) -> list[str]:
        return [loop.name for loop in self._config.loops]

    def loop_config(self, name: str) -> LoopBlock:
        loop = self._config.loop(name)
        if loop is None:
            raise UnknownLoopError(name, self.names)
        return loop

    def _resolve(self, name: str) -> _Loop:
        if name not in self._loops:
            loop = self.loop_config(name)
            self._loops[name] = _Loop(loop, _build_spec(loop, self._config_dir, build_context(self._config, loop)))
        return self._loops[name]

    def check(self) -> list[str]:
        """"loops[i].key: problem" for each loop that cannot be built (the others are built and kept).

        Each loop's engine and context are made once, so a factory whose
        engine_factory or context_factory fails is found before any run starts.

        Not part of ``load_config``: importing a factory runs user code, which
        `check`, `serve` and `run` must do anyway, but `status` and `decide` need not.

        A loop whose spec says it is ``inactive`` (e.g. daily-triage without its
        token) is no problem: it is logged as a warning, saying why, and its runs
        end at once with that reason (``new_engine``).
        """
        problems = []
        for i, loop in enumerate(self._config.loops):
            try:
                resolved = self._resolve(loop.name)
                resolved.engine(checkpoint=None, persistence=None)  # once, so a broken one fails here, not in a run
                resolved.context()
            except LoopBuildError as err:
                problems.append(f"loops[{i}].{err.key}: {err.problem}")
                continue
            if reason := self.inactive(loop.name):
                log.warning("warning: loop %s is inactive: %s", loop.name, reason)
        return problems

    def inactive(self, name: str) -> str | None:
        """Why the loop's spec says it cannot run yet (``LoopSpec.inactive``), or None."""
        reason = getattr(self._resolve(name).spec, "inactive", None)
        return str(reason) if reason else None

    def summary(self, name: str, result: LoopResult) -> str | None:
        """The loop's own words for how ``result`` ended (``LoopSpec.summarize``), or None.

        None when the loop has no hook or is gone from the config; a hook that
        fails or returns no text is logged and ignored: the run's end is still told.
        """
        summarize = self._spec_hook(name, "summarize")
        if summarize is None:
            return None
        try:
            text = summarize(result)
        except Exception:  # the loop's own code: its failure must not lose the run's end
            log.exception("loop %s: summarize(result) failed; the run's end shows its output instead", name)
            return None
        if not isinstance(text, str) or not text.strip():
            log.warning("loop %s: summarize(result) returned %r, not text; showing the output instead", name, text)
            return None
        return text.strip()

    def _spec_hook(self, name: str, hook: str) -> Callable[..., Any] | None:
        """The loop's optional ``LoopSpec`` hook, or None: a factory's own spec type may lack it, and a loop gone
        from the config or that cannot be built has none."""
        try:
            found: Callable[..., Any] | None = getattr(self._resolve(name).spec, hook, None)
        except (UnknownLoopError, LoopBuildError):
            return None
        return found

    def modification_problem(self, name: str, modifications: dict[str, Any]) -> str | None:
        """Why the loop refuses these MODIFY changes (``LoopSpec.modification_problem``), else None.

        Asked when a vote is cast. A loop gone from the config, or that cannot
        be built, refuses nothing here: the run's resume says what is wrong.
        """
        check = self._spec_hook(name, "modification_problem")
        if check is None:
            return None
        try:
            problem = check(modifications)
        except Exception:  # the loop's own code: its failure must not lose the vote; the resume checks again
            log.exception("loop %s: modification_problem(changes) failed; the vote is not refused for it", name)
            return None
        return problem if isinstance(problem, str) and problem.strip() else None

    def connection_checks(self) -> list[tuple[str, bool]]:
        """(line, ok) for each loop that checks its own connection (``LoopSpec.check_connection``), online."""
        lines = []
        for name in self.names:
            try:
                resolved = self._resolve(name)
            except LoopBuildError:
                continue  # reported by check()
            check = getattr(resolved.spec, "check_connection", None)
            if check is None or self.inactive(name):
                continue
            try:
                lines.append((f"loop {name}: {check()}", True))
            except Exception as err:  # noqa: BLE001 - each loop's own failure is its line
                lines.append((f"loop {name}: {err}", False))
        return lines

    def new_engine(self, name: str, run_id: str, store: Store, stop_requested: Callable[[], bool],
                   claim_held: Callable[[], bool] = lambda: True) -> LoopEngine:
        """A fresh engine (components registered anew) that saves into ``run_id``'s snapshot while it may."""
        resolved = self._resolve(name)
        if reason := self.inactive(name):
            raise LoopBuildError(name, "options", f"inactive: {reason}")
        checkpoint = HumanCheckpoint(checkpoint_config_for(resolved.config, self._state_dir))
        sink = SnapshotSink(store, run_id, stop_requested, self._state_dir, claim_held)
        return resolved.engine(checkpoint=checkpoint, persistence=sink)

    def new_context(self, name: str) -> LoopContext:
        return self._resolve(name).context()


def _source(loop: LoopBlock) -> tuple[str, str]:
    """The loop's key that names its builder (``pattern`` or ``factory``) and its value."""
    key, source = ("pattern", loop.pattern) if loop.pattern else ("factory", loop.factory)
    assert source is not None  # the config requires exactly one of pattern and factory
    return key, source


def build_context(config: BotConfig, loop: LoopBlock) -> BuildContext:
    """What a builder may be given: the bot's ``github:`` connection and where the loop's reviews go on GitHub."""
    github = None
    if config.github is not None:
        block = config.github
        github = GitHubConnection(
            base_url=block.base_url,
            token=block.token.get_secret_value() or None if block.token is not None else None,
            app_id=block.app_id,
            private_key=block.private_key.get_secret_value() or None if block.private_key is not None else None,
            installation_id=block.installation_id,
        )
    targets = [t.github for t in (*loop.review.post_to, *loop.review.timeout.escalate_to) if t.github is not None]
    issues = tuple(dict.fromkeys((t.repository, t.issue) for t in targets))
    return BuildContext(github=github, review_issues=issues)


def _build_spec(loop: LoopBlock, config_dir: Path | None = None, context: BuildContext | None = None) -> LoopSpec:
    """Resolve the loop's pattern or factory and call it with the options; failures name the key at fault.

    A factory's module is looked up in ``config_dir`` first (see ``LoopCatalog``).
    """
    key, source = _source(loop)
    try:
        if key == "pattern":
            builder = get_pattern(source)
        else:
            if config_dir is not None:
                search_first(config_dir, source)
            builder = load_factory(source)
    except PatternError as err:
        raise LoopBuildError(loop.name, key, import_problem(err, source, config_dir)) from err
    try:
        spec = build_spec(builder, dict(loop.options), context)
    except PatternError as err:  # a builder's way of refusing its options
        raise LoopBuildError(loop.name, "options", str(err)) from err
    except Exception as err:  # user code crashed: whatever it raised, the loop cannot be built
        problem = f"{source} raised {type(err).__name__}: {err}"
        raise LoopBuildError(loop.name, key, problem, expected=False) from err
    if not isinstance(spec, LoopSpec):
        raise LoopBuildError(
            loop.name, key,
            f"{source} returned {type(spec).__name__}, not a LoopSpec; "
            "return LoopSpec(engine_factory=..., context_factory=...) (from bot.patterns)",
        )
    return spec
