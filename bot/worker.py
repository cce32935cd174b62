"""How one loop's engine is built and driven for one run.

The runner decides *when* a run starts or continues; this module knows *how*:
resolve the loop's pattern or factory once, give every new engine the run's
snapshot sink and a ``HumanCheckpoint`` without a decision handler (so a
checkpoint stops the run instead of blocking a thread), and pick between
``engine.run``, ``engine.resume(state, response)`` and ``engine.resume(state)``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint, ReviewResponse
from loop_engine.engine import LoopEngine
from loop_engine.errors import RunInterrupted as EngineInterrupt
from loop_engine.state_machine import derive_result_status
from loop_engine.serialization import state_from_dict
from loop_engine.types import ExecutionState, LoopContext, LoopResult, LoopState, LoopStatus

from adapters.suggest import did_you_mean

from bot.config import BotConfig, LoopConfig
from bot.patterns import BuildContext, GitHubConnection, LoopSpec, PatternError, build_spec, get_pattern, load_factory
from bot.store.base import Store

__all__ = [
    "UnknownLoopError",
    "LoopBuildError",
    "RunInterrupted",
    "ClaimLost",
    "SnapshotSink",
    "LoopCatalog",
    "checkpoint_config_for",
    "continue_run",
    "result_summary",
    "saved_progress",
]


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


class RunInterrupted(EngineInterrupt):
    """The bot is shutting down: the run stopped right after a save, between steps.

    Raised by ``SnapshotSink.save`` out of the engine, so nothing after the
    save runs; the run stays "running" and the next start continues it from
    the snapshot just written.
    """


_T = TypeVar("_T")
log = logging.getLogger(__name__)

class ClaimLost(RunInterrupted):
    """This process lost its claim on the run (replicas: its database session was cut) and wrote nothing more.

    Raised by ``SnapshotSink.save`` before writing: another replica may have
    claimed the run and continued it from its last snapshot, and two writers
    of one run would run its steps twice. The run stays "running" for the
    leader's sweep, which hands it to whichever replica claims it.
    """


#: Saves after which a shutdown may stop a run: a step just finished, or one is about to start.
_STOPPABLE = frozenset({ExecutionState.ITERATION_COMPLETE, ExecutionState.ACTING})


class SnapshotSink:
    """The engine's ``persistence``: every save becomes the run's snapshot in the store.

    When ``stop_requested()`` says the bot is shutting down, a save between
    steps raises ``RunInterrupted`` after writing: SIGTERM lets the current
    step finish and be saved, and starts no other. Saves at a pause or at the
    end never raise - those runs are done with the engine anyway.
    """

    def __init__(self, store: Store, run_id: str, stop_requested: Callable[[], bool],
                 state_dir: Path | None = None, claim_held: Callable[[], bool] = lambda: True) -> None:
        self._store = store
        self._run_id = run_id
        self._stop_requested = stop_requested
        self._claim_held = claim_held
        self.run_id = run_id  # public, with state_dir, for components that file what a run made
        self.state_dir = state_dir

    def save(self, state: LoopState, trace_id: str | None = None) -> None:
        if not self._claim_held():  # fenced: the run may be another replica's now
            raise ClaimLost(f"run {self._run_id} lost its claim (the database session holding it ended); "
                            "the replica that claims it next continues it from its last snapshot")
        self._store.save_state(self._run_id, state)  # the engine's own encoder: no dict round trip
        if state.execution_state in _STOPPABLE and self._stop_requested():
            raise RunInterrupted(f"run {self._run_id} stopped at {state.execution_state.value} for shutdown")


def checkpoint_config_for(loop: LoopConfig, state_dir: Path) -> CheckpointConfig:
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

    config: LoopConfig
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

    def loop_config(self, name: str) -> LoopConfig:
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
        try:
            summarize = getattr(self._resolve(name).spec, "summarize", None)  # a factory's own spec type may lack it
        except (UnknownLoopError, LoopBuildError):
            return None
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

    def modification_problem(self, name: str, modifications: dict[str, Any]) -> str | None:
        """Why the loop refuses these MODIFY changes (``LoopSpec.modification_problem``), else None.

        Asked when a vote is cast. A loop gone from the config, or that cannot
        be built, refuses nothing here: the run's resume says what is wrong.
        """
        try:
            check = getattr(self._resolve(name).spec, "modification_problem", None)
        except (UnknownLoopError, LoopBuildError):
            return None
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


def _source(loop: LoopConfig) -> tuple[str, str]:
    """The loop's key that names its builder (``pattern`` or ``factory``) and its value."""
    key, source = ("pattern", loop.pattern) if loop.pattern else ("factory", loop.factory)
    assert source is not None  # the config requires exactly one of pattern and factory
    return key, source


def build_context(config: BotConfig, loop: LoopConfig) -> BuildContext:
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


def _build_spec(loop: LoopConfig, config_dir: Path | None = None, context: BuildContext | None = None) -> LoopSpec:
    """Resolve the loop's pattern or factory and call it with the options; failures name the key at fault.

    A factory's module is looked up in ``config_dir`` first (see ``LoopCatalog``).
    """
    key, source = _source(loop)
    try:
        if key == "pattern":
            builder = get_pattern(source)
        else:
            if config_dir is not None:
                _search_first(config_dir, source)
            builder = load_factory(source)
    except PatternError as err:
        raise LoopBuildError(loop.name, key, _import_problem(err, source, config_dir)) from err
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


def _search_first(folder: Path, source: str) -> None:
    """Put ``folder`` at the front of ``sys.path`` if it holds the factory's module (``name.py`` or ``name/``).

    For the rest of the process, not just the import: the factory's module may
    import a sibling later, from an engine built to resume a run. Only when the
    module is there: a config folder without it must not shadow anything else.
    """
    top = source.partition(":")[0].strip().partition(".")[0]
    entry = str(folder)
    if top and ((folder / f"{top}.py").is_file() or (folder / top).is_dir()) and entry not in sys.path:
        sys.path.insert(0, entry)
        importlib.invalidate_caches()  # a module written since the last import must be seen


def _import_problem(err: PatternError, source: str, config_dir: Path | None) -> str:
    """``err``'s message, plus where Python looked (module not found) or where the module broke.

    A newcomer's first factory most often fails here: it is not where Python
    looks, or it has a typo. Either way the message should say which folder
    and which line, not leave them to guess.
    """
    cause = err.__cause__
    message = str(err)
    module = source.partition(":")[0].strip()
    if isinstance(cause, ModuleNotFoundError) and cause.name and (
        module == cause.name or module.startswith(cause.name + ".")
    ):
        return f"{message} Looked in {_searched(config_dir)}{_nearby(cause.name, config_dir)}"
    if cause is None or not isinstance(cause, Exception):
        return message
    where = _where(cause)
    return f"{message} ({where})" if where else message


def _searched(config_dir: Path | None) -> str:
    """The import path as a person would check it: the config's folder, PYTHONPATH, this interpreter's packages."""
    places = [f"the config's folder ({config_dir})"] if config_dir is not None else []
    pythonpath = os.environ.get("PYTHONPATH")
    places.append(f"PYTHONPATH ({pythonpath})" if pythonpath else "PYTHONPATH (not set)")
    places.append(f"the packages installed for {sys.executable}")
    return ", then ".join(places) + "."


def _nearby(missing: str, config_dir: Path | None) -> str:
    """A did-you-mean from the modules in the config's folder: `myloop` for `myloops.py` is the usual slip."""
    if config_dir is None or "." in missing:
        return ""
    try:
        names = [p.stem if p.suffix == ".py" else p.name for p in config_dir.iterdir()
                 if p.suffix == ".py" or (p / "__init__.py").is_file()]
    except OSError:
        return ""
    hint = did_you_mean(missing, names)
    return f" In the config's folder{hint.replace(' - did', ': did', 1)}" if hint else ""


def _where(exc: BaseException) -> str | None:
    """"at FILE line N" of the line in the user's module that failed to import (and where it was raised, if deeper)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"at {exc.filename} line {exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    # the frames after importlib's own are the module's code: its top line, then whatever it called
    start = next((i for i, f in enumerate(frames) if f.filename.endswith(os.path.join("importlib", "__init__.py"))), -1)
    code = [f for f in frames[start + 1:] if not f.filename.startswith("<")]
    if not code:
        return None
    first, last = code[0], code[-1]
    where = f"at {first.filename} line {first.lineno}"
    if (last.filename, last.lineno) != (first.filename, first.lineno):
        where += f", raised in {last.filename} line {last.lineno}"
    return where


def _result_from_state(state: LoopState) -> LoopResult:
    """The verdict of a snapshot that needs no engine step: already paused or finished."""
    return LoopResult(
        status=LoopStatus.PAUSED if state.pending_review is not None else derive_result_status(state),
        plan=state.current_plan,
        iterations=state.current_iteration,
        failures=list(state.failures),
        recoveries=list(state.recoveries),
        evaluations=list(state.evaluations),
        execution_state=state.execution_state,
        reason=state.stop_reason,
        review_request=state.pending_review,
        trace_id=state.trace_id,
    )


async def continue_run(
    engine: LoopEngine, state: LoopState, response: ReviewResponse | None
) -> tuple[LoopResult, LoopState]:
    """Apply ``response`` if given; else pick a snapshot up where it stopped.

    A snapshot already paused or finished is answered from the state itself:
    re-entering the engine there would either do nothing or - for a pause
    whose decision is still pending - wrongly continue without one. Returns
    the result and the state it came from.
    """
    if response is None and (state.pending_review is not None or state.execution_state.is_terminal):
        return _result_from_state(state), state
    result = await engine.resume(state, response) if response is not None else await engine.resume(state)
    return result, engine.state


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def result_summary(result: LoopResult) -> dict[str, Any]:
    """What ``status --json`` shows of a finished run; the full state stays in the snapshot."""
    plan = result.plan
    return {
        "status": result.status.name,
        "execution_state": result.execution_state.value if result.execution_state else None,
        "iterations": result.iterations,
        "reason": result.reason,
        "output": _jsonable(result.output),
        "steps": {step.id: step.status.value for step in plan.steps} if plan else {},
        "failures": [_failure_view(f) for f in result.failures if f.status.name != "RECOVERED"],
    }


def _failure_view(failure: Any) -> dict[str, Any]:
    """A failure as ``status --json`` shows it: with the file and line when the loop's own code raised."""
    view: dict[str, Any] = {"step": failure.step_id, "source": failure.source_component, "message": failure.message}
    at = failure.evidence.get("raised_at") if isinstance(failure.evidence, dict) else None
    if isinstance(at, dict):
        view.update(file=at.get("file"), line=at.get("line"))
    return view


def saved_progress(snapshot: dict[str, Any] | None) -> str:
    """Where a stopped run's snapshot stands, for the person who stopped it: "after step 2 of 4"."""
    plan = state_from_dict(snapshot).current_plan if snapshot is not None else None
    done = sum(1 for step in plan.steps if step.is_completed()) if plan is not None else 0
    return f"after step {done} of {len(plan.steps)}" if plan is not None and done else "before its first step"
