"""The built-in ``daily-triage`` loop: propose labels for a repository's open issues and PRs, ask, then apply.

Real loop_engine components (see ``components``): the planner discovers
every open issue and pull request (paginated) and plans one step per
proposed change, skipping what nothing changed since the last run; a gate
refuses any action but adding labels from the configured set and
commenting; the actor asks one human review for the whole proposal, then
re-checks each change against the issue as it is now before applying it,
paced to GitHub's content-creation limits; the evaluator holds every change
to what was approved; a report is saved in ``state_dir/triage/``. The
review's proposal is data (``report.proposal_of``); a run's end is the
report's line (``summarize``).

Options (``loops[].options``)::

    repository: octo/ops            # required; empty: the loop is inactive
    token_env: null                 # a variable holding a token: overrides the bot's github: block
    base_url: null                  # overrides the github: block's base_url (GHES: https://HOST/api/v3)
    labels: {P0: P0, P1: P1, P2: P2}            # priority -> label name
    keywords: {P0: [security, ...], P1: [...], P2: []}  # whole words, case-insensitive
    stale_days: 30
    stale_label: stale              # null: count stale issues, label none
    review_label: needs-reviewer    # null: count PRs needing reviewers, label none
    max_changes: 500                # per run; the rest is proposed next run
    writes_per_minute: 80           # GitHub's content-creation limits
    writes_per_hour: 500
    review_chars: 6000              # unused since the review carries the whole proposal; accepted for old configs
    report_issue: null              # an issue number to post the report on
    apply_without_review: false     # with checkpoint: {preset: disabled}, apply anyway
    recheck_every: 60               # seconds between re-reads while applying
    max_wait: 120                   # longest rate-limit wait slept through, seconds
    progress_every: 25              # a progress line every N changes
    state_dir: null                 # default: the bot's state_dir

The connection: the bot's ``github:`` block (its token or App installation,
and its ``base_url``, so GitHub Enterprise Server works), given through the
build context; ``token_env`` overrides it; with neither, ``GITHUB_TOKEN``.
`loopbot check` asks GitHub, as that connection, who it is and whether it
can read the repository.

Triage never proposes changes to the issues its own reviews are posted on
(``review.post_to`` and ``escalate_to``), to its ``report_issue``, nor to
the issues loopbot opened (one issue per run).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.components import PassThroughObserver
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.types import ComponentType, LoopContext, LoopResult

from adapters.channel import ChannelError
from adapters.github.client import DEFAULT_BASE_URL

from .. import BuildContext, GitHubConnection, LoopSpec, PatternError
from .components import AllowedActionsGate, TriageActor, TriageEvaluator, TriagePlanner, modification_problem
from .github import Pacer, TriageGitHub
from .rules import DEFAULT_KEYWORDS, DEFAULT_LABELS, Rules

__all__ = ["DEFAULTS", "TriageSpec", "build", "connection_of", "settings_from", "summarize"]

DEFAULTS: dict[str, Any] = {
    "repository": "",
    "token_env": None,
    "base_url": None,
    "labels": dict(DEFAULT_LABELS),
    "keywords": {key: list(words) for key, words in DEFAULT_KEYWORDS.items()},
    "stale_days": 30,
    "stale_label": "stale",
    "review_label": "needs-reviewer",
    "max_changes": 500,
    "writes_per_minute": 80,
    "writes_per_hour": 500,
    "review_chars": 6000,
    "report_issue": None,
    "apply_without_review": False,
    "recheck_every": 60,
    "max_wait": 120,
    "progress_every": 25,
    "state_dir": None,
}
_REPOSITORY = re.compile(r"\A[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z")


@dataclass(frozen=True)
class TriageSpec(LoopSpec):
    """A LoopSpec that may be ``inactive`` (why), e.g. while its token or repository is unset."""

    inactive: str | None = None


def _whole(name: str, value: Any, low: int, high: int | None = None, *, none: bool = False) -> None:
    if none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        span = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise PatternError(f"daily-triage: option {name} must be a whole number {span}, got {value!r}")


def settings_from(options: dict[str, Any]) -> dict[str, Any]:
    """The options with defaults filled in; PatternError (``loops[i].options`` in `loopbot check`) if wrong."""
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise PatternError(f"daily-triage: unknown option(s) {', '.join(unknown)}; known: {', '.join(DEFAULTS)}")
    s = {**DEFAULTS, **{k: v for k, v in options.items()}}
    repository = str(s["repository"] or "").strip()
    if repository and not _REPOSITORY.match(repository):
        raise PatternError(f"daily-triage: option repository must look like owner/name, got {repository!r}")
    s["repository"] = repository
    keywords, labels = s["keywords"], s["labels"]
    if not isinstance(keywords, dict) or not keywords or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(w, str) for w in v) for k, v in keywords.items()
    ):
        raise PatternError("daily-triage: option keywords must map each priority to a list of words "
                           "(e.g. {P0: [security], P1: [crash, bug], P2: []})")
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                               for k, v in labels.items()):
        raise PatternError("daily-triage: option labels must map priorities to label names (e.g. {P0: urgent})")
    extra = sorted(set(labels) - set(keywords))
    if extra:
        raise PatternError(f"daily-triage: option labels names {', '.join(extra)}, which keywords does not; "
                           f"priorities: {', '.join(keywords)}")
    for name in ("stale_label", "review_label"):
        if s[name] is not None and (not isinstance(s[name], str) or not s[name].strip()):
            raise PatternError(f"daily-triage: option {name} must be a label name or null, got {s[name]!r}")
    _whole("stale_days", s["stale_days"], 1)
    _whole("max_changes", s["max_changes"], 1, 100_000)
    _whole("writes_per_minute", s["writes_per_minute"], 1, none=True)
    _whole("writes_per_hour", s["writes_per_hour"], 1, none=True)
    _whole("review_chars", s["review_chars"], 1000, 60_000)
    _whole("report_issue", s["report_issue"], 1, none=True)
    _whole("progress_every", s["progress_every"], 0)
    for name in ("recheck_every", "max_wait"):
        if isinstance(s[name], bool) or not isinstance(s[name], (int, float)) or s[name] < 0:
            raise PatternError(f"daily-triage: option {name} must be a number of seconds >= 0, got {s[name]!r}")
    if not isinstance(s["apply_without_review"], bool):
        raise PatternError("daily-triage: option apply_without_review must be true or false")
    if s["token_env"] is not None and (not isinstance(s["token_env"], str) or not s["token_env"]):
        raise PatternError("daily-triage: option token_env must name an environment variable (or be null: "
                           "the bot's github: block)")
    if s["base_url"] is not None and (not isinstance(s["base_url"], str)
                                      or not s["base_url"].startswith(("http://", "https://"))):
        raise PatternError(f"daily-triage: option base_url must be an http(s) URL, got {s['base_url']!r}")
    return s


def summarize(result: LoopResult, repository: str) -> str:
    """How a run ended, in the report's words (``LoopSpec.summarize``), or what was proposed when nothing ran."""
    outputs = [v for v in (result.output or {}).values() if isinstance(v, dict)]
    report = next((v for v in outputs if v.get("kind") == "report"), None)
    if report is not None and isinstance(report.get("summary"), str):
        return str(report["summary"])
    proposed = next((v for v in outputs if v.get("kind") == "propose"), None)
    if proposed is None:
        return f"triage of {repository}: nothing proposed"
    n = int(proposed.get("proposed", 0))
    return f"triage of {repository}: " + (f"proposed {n:,} change(s), applied none" if n else "nothing to change")


def connection_of(settings: dict[str, Any], github: GitHubConnection | None, environ: Any) -> GitHubConnection:
    """The connection triage uses: ``token_env`` if set, else the bot's ``github:`` block, else ``GITHUB_TOKEN``.

    ``base_url`` from the options wins over the block's.
    """
    base_url = settings["base_url"]
    if settings["token_env"] is None and github is not None:
        return replace(github, base_url=base_url or github.base_url)
    variable = settings["token_env"] or "GITHUB_TOKEN"
    default = github.base_url if github is not None else DEFAULT_BASE_URL
    return GitHubConnection(base_url=base_url or default, token=environ.get(variable) or None)


def _inactive(settings: dict[str, Any], connection: GitHubConnection, github: GitHubConnection | None) -> str | None:
    missing, hint = [], ""
    if connection.problem is not None:
        if settings["token_env"] is None and github is not None:
            missing.append(connection.problem)
        else:
            missing.append(f"{settings['token_env'] or 'GITHUB_TOKEN'} is not set")
            hint = "" if settings["token_env"] else " (or give the bot a github: block)"
    if not settings["repository"]:
        missing.append("options.repository is empty")
    if not missing:
        return None
    return " and ".join(missing) + f"; set {'both' if len(missing) > 1 else 'it'}{hint} to enable it"


def build(options: dict[str, Any], *, context: BuildContext | None = None, environ: Any = None,
          clock: Callable[[], datetime] | None = None, sleep: Callable[[float], None] | None = None) -> LoopSpec:
    """The ``daily-triage`` pattern's builder (``environ``, ``clock`` and ``sleep`` for tests and benches)."""
    settings = settings_from(options)
    context = context or BuildContext()
    env = os.environ if environ is None else environ
    connection = connection_of(settings, context.github, env)
    inactive = _inactive(settings, connection, context.github)
    own_issues = frozenset(issue for repository, issue in context.review_issues
                           if repository.casefold() == settings["repository"].casefold() and issue is not None)
    own_issues |= {settings["report_issue"]} if settings["report_issue"] else set()
    rules = Rules(settings["keywords"], settings["labels"], stale_days=settings["stale_days"],
                  stale_label=settings["stale_label"], review_label=settings["review_label"])
    now = clock or (lambda: datetime.now(UTC))
    folder_name = settings["repository"].replace("/", "__") or "unset"

    def engine_factory(*, checkpoint: Any = None, persistence: Any = None) -> LoopEngine:
        if checkpoint is None:
            checkpoint = HumanCheckpoint(CheckpointConfig(save_checkpoints=False))
        cache: dict[str, TriageGitHub] = {}

        def github() -> TriageGitHub:
            if "gh" not in cache:
                if inactive is not None:
                    raise RuntimeError(f"daily-triage is inactive: {inactive}")
                pause = sleep or time.sleep
                cache["gh"] = TriageGitHub(
                    connection.client(), settings["repository"],
                    pacer=Pacer(settings["writes_per_minute"], settings["writes_per_hour"], sleep=pause),
                    max_wait=float(settings["max_wait"]), sleep=pause)
            return cache["gh"]

        def folder() -> Path:
            base = settings["state_dir"] or getattr(persistence, "state_dir", None)
            if base is None:
                where = Path(getattr(getattr(checkpoint, "config", None), "checkpoint_dir", "state/checkpoints"))
                base = where.parent if where.name == "checkpoints" else Path("state")
            return Path(base) / "triage" / folder_name

        def run_name() -> str:
            run_id = getattr(persistence, "run_id", None)
            return str(run_id) if run_id else now().strftime("run-%Y%m%dT%H%M%SZ")

        gate = AllowedActionsGate(rules.allowed_labels)
        engine = LoopEngine(LoopConfig(max_iterations=settings["max_changes"] + 10, max_recovery_attempts=3),
                            checkpoint=checkpoint, persistence=persistence)
        engine.register_component(ComponentType.PLANNER,
                                  TriagePlanner(settings, rules, github, folder, now, own_issues=own_issues))
        engine.register_component(ComponentType.ACTOR,
                                  TriageActor(settings, rules, github, folder, run_name, checkpoint, gate, now))
        engine.register_component(ComponentType.OBSERVER, PassThroughObserver())
        engine.register_component(ComponentType.EVALUATOR, TriageEvaluator(rules))
        engine.add_gate(gate, "pre")
        return engine

    def context_factory() -> LoopContext:
        repository = settings["repository"] or "(no repository)"
        return LoopContext(goal=f"Triage the open issues and pull requests of {repository}",
                           initial_context={"repository": settings["repository"], "skip": [], "label": {}})

    def check_connection() -> str:
        """Who triage acts as on GitHub and that it can read the repository (`loopbot check`, online)."""
        client = connection.client()
        me = client.me()
        try:
            client.get_json(f"/repos/{settings['repository']}/issues", {"per_page": "1"})
        except ChannelError as err:
            raise ChannelError(f"daily-triage cannot read {settings['repository']} at {connection.base_url} "
                               f"({err}); give the token or App access to it", permanent=True) from err
        return (f"daily-triage reads {settings['repository']} at {connection.base_url} "
                f"with the {connection.auth} of @{me.login}")

    return TriageSpec(engine_factory=engine_factory, context_factory=context_factory,
                      summarize=lambda result: summarize(result, settings["repository"]),
                      modification_problem=lambda changes: modification_problem(changes, rules),
                      check_connection=check_connection, inactive=inactive)
