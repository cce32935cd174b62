"""The daily review converges: its own issues are never triaged, loopbot's writes are no change, reviewed PRs rest.

Against the fake GitHub on 127.0.0.1; each run is a fresh engine over the
same state folder, as the daily schedule makes them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.commands import Command, parse_command, parse_comment
from adapters.modify_changes import parse_assignments
from bot.patterns import BuildContext, GitHubConnection, LoopSpec
from bot.patterns.triage import build
from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint, HumanDecision, ReviewResponse
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import state_to_dict
from loop_engine.types import LoopResult, LoopState, LoopStatus
from tests.fakes.github_triage import TriageGitHub, days_ago

REPO = "octo/ops"
NOW = datetime.now(UTC)
REVIEW_ISSUE = 42


@pytest.fixture
def gh() -> Iterator[TriageGitHub]:
    with TriageGitHub() as fake:
        fake.bulk(REPO, [
            {"number": 1, "title": "Crash on start", "updated_at": days_ago(1, NOW)},
            {"number": 2, "title": "Fix the parser", "pr": True, "reviewers": ["bob"], "updated_at": days_ago(1, NOW)},
            {"number": 3, "title": "Fix the docs", "pr": True, "updated_at": days_ago(1, NOW)},
            {"number": 4, "title": "Old crash", "updated_at": days_ago(29, NOW)},
            {"number": REVIEW_ISSUE, "title": "Triage reviews", "updated_at": days_ago(1, NOW)},
        ])
        yield fake


def _spec(gh: TriageGitHub, tmp_path: Path, clock: Callable[[], datetime] = lambda: NOW, **extra: Any) -> LoopSpec:
    context = BuildContext(github=GitHubConnection(base_url=gh.base_url, token="ghp_block"),
                           review_issues=((REPO, REVIEW_ISSUE), (REPO, None)))
    options = {"repository": REPO, "state_dir": str(tmp_path / "state"), "writes_per_minute": None,
               "writes_per_hour": None, **extra}
    return build(options, context=context, environ={}, clock=clock)


def _checkpoint(tmp_path: Path) -> HumanCheckpoint:
    return HumanCheckpoint(CheckpointConfig(checkpoint_dir=tmp_path / "checkpoints"))


async def _run(spec: LoopSpec, tmp_path: Path, run: str = "daily-triage-run-1") -> tuple[LoopResult, LoopState]:
    engine = spec.engine_factory(checkpoint=_checkpoint(tmp_path))
    result = await engine.run(spec.context_factory(), trace_id=run)
    return result, engine.state


async def _decide(spec: LoopSpec, state: LoopState, tmp_path: Path, decision: HumanDecision = HumanDecision.APPROVE,
                  modifications: dict[str, Any] | None = None) -> LoopResult:
    assert state.pending_review is not None
    response = ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=decision,
                              reviewer="local:alice", modifications=modifications)
    engine = spec.engine_factory(checkpoint=_checkpoint(tmp_path))
    return await engine.resume(state_from_dict(json.loads(json.dumps(state_to_dict(state)))), response)


def _proposed(result: LoopResult) -> dict[int, list[str]]:
    assert result.plan is not None
    return {int(s.metadata["number"]): list(s.metadata["labels"])
            for s in result.plan.steps if s.metadata.get("kind") == "change"}


def _overview(result: LoopResult) -> dict[str, Any]:
    files = result.output["propose"]["files"]
    data = json.loads(Path(files["json"]).read_text())
    assert isinstance(data, dict)
    return dict(data["overview"])


def _run_issue(gh: TriageGitHub, number: int, login: str) -> None:
    """An issue as loopbot's GitHub channel opens one per run (or someone imitating it, as ``login``)."""
    gh.bulk(REPO, [{"number": number, "title": f"loopbot: daily-triage run {number}", "updated_at": days_ago(0, NOW)}])
    with gh.lock:
        issue = gh.issues[(REPO, number)]
        issue["body"] = f"<!-- loopbot:run=daily-triage-run-{number} -->\nloopbot opened this issue for run ..."
        issue["user"] = gh.user(login)


async def test_its_own_review_issues_are_never_proposed(gh: TriageGitHub, tmp_path: Path) -> None:
    _run_issue(gh, 43, gh.bot_login)
    _run_issue(gh, 44, "mallory")  # the marker alone does not make an issue loopbot's
    result, _ = await _run(_spec(gh, tmp_path), tmp_path)
    proposed = _proposed(result)
    assert REVIEW_ISSUE not in proposed and 43 not in proposed
    assert proposed[44] == ["P2"] and proposed[1] == ["P1"]
    assert _overview(result)["open_issues"] == 3  # 1, 4 and 44: loopbot's own are not counted either


async def test_its_report_issue_is_not_triaged_either(gh: TriageGitHub, tmp_path: Path) -> None:
    result, _ = await _run(_spec(gh, tmp_path, report_issue=4), tmp_path)
    assert set(_proposed(result)) == {1, 3}


async def test_a_second_run_over_an_unchanged_repository_proposes_nothing(gh: TriageGitHub, tmp_path: Path) -> None:
    _run_issue(gh, 43, gh.bot_login)
    spec = _spec(gh, tmp_path)
    result, state = await _run(spec, tmp_path)
    assert result.status is LoopStatus.PAUSED and set(_proposed(result)) == {1, 3, 4}
    for issue in (REVIEW_ISSUE, 43):  # what loopbot's channel writes on its review issues meanwhile
        gh.person_labels(REPO, issue, "loopbot:awaiting-review", login=gh.bot_login)
    gh.person_labels(REPO, 1, "loopbot:awaiting-review", login=gh.bot_login)  # loopbot's label: nobody else's
    done = await _decide(spec, state, tmp_path)
    assert done.status is LoopStatus.COMPLETED, done.reason
    assert gh.labels_of(REPO, 1) == ["loopbot:awaiting-review", "P1"]
    assert gh.labels_of(REPO, 3) == ["needs-reviewer"] and gh.labels_of(REPO, 4) == ["P1"]
    writes = len(gh.calls_to("POST", r"/issues/\d+/labels$"))

    again, _ = await _run(spec, tmp_path, "daily-triage-run-2")
    assert again.status is LoopStatus.COMPLETED, again.reason
    assert again.output["propose"] == {**again.output["propose"], "proposed": 0, "asked": False}
    assert len(gh.calls_to("POST", r"/issues/\d+/labels$")) == writes


async def test_loopbot_writes_do_not_reset_staleness(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = _spec(gh, tmp_path)
    result, state = await _run(spec, tmp_path)
    assert _proposed(result)[4] == ["P1"]  # 29 days: not stale yet
    await _decide(spec, state, tmp_path)
    later = _spec(gh, tmp_path, clock=lambda: NOW + timedelta(days=2))
    again, _ = await _run(later, tmp_path, "daily-triage-run-2")
    assert _proposed(again) == {4: ["stale"]}  # 31 days since a person touched it; loopbot's label is no touch


async def test_a_person_who_acts_after_loopbot_makes_the_issue_recent(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = _spec(gh, tmp_path)
    _, state = await _run(spec, tmp_path)
    await _decide(spec, state, tmp_path)
    gh.person_labels(REPO, 4, "question")  # a person, after loopbot's write
    later = _spec(gh, tmp_path, clock=lambda: NOW + timedelta(days=2))
    again, _ = await _run(later, tmp_path, "daily-triage-run-2")
    assert again.plan is not None and 4 not in _proposed(again)


async def test_a_pull_request_with_a_reviewer_is_not_reported_again(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = _spec(gh, tmp_path)
    result, state = await _run(spec, tmp_path)
    assert _overview(result)["prs_needing_reviewers"] == 1 and _proposed(result)[3] == ["needs-reviewer"]
    await _decide(spec, state, tmp_path, HumanDecision.REJECT)
    again, _ = await _run(spec, tmp_path, "daily-triage-run-2")  # PR 2 (requested reviewer) unchanged
    assert _overview(again)["prs_needing_reviewers"] == 1  # only PR 3
    gh.review(REPO, 3, "carol")  # a submitted review: GitHub lists no requested reviewer any more
    third, _ = await _run(spec, tmp_path, "daily-triage-run-3")
    assert _overview(third)["prs_needing_reviewers"] == 0
    assert third.output["propose"]["proposed"] == 0
    fourth, _ = await _run(spec, tmp_path, "daily-triage-run-4")  # unchanged since: remembered as reviewed
    assert _overview(fourth)["prs_needing_reviewers"] == 0


def _modifications(command: Command | Exception) -> dict[str, Any]:
    assert isinstance(command, Command), command
    return dict(command.modifications)


@pytest.mark.parametrize("where", ["slack", "github", "local"])
async def test_modify_without_context_prefix_on_every_channel(gh: TriageGitHub, tmp_path: Path, where: str) -> None:
    text = "skip=#1 label.#4=P0,stale"
    changes = {
        "slack": lambda: _modifications(parse_command(f"modify daily-triage-1 {text}")),
        "github": lambda: _modifications(parse_comment(f"Looks fine, but\n/modify {text}\n")[0]),
        "local": lambda: parse_assignments(text.split()),
    }[where]()
    assert changes == {"context": {"skip": "#1", "label": {"#4": "P0,stale"}}}
    spec = _spec(gh, tmp_path)
    assert spec.modification_problem is not None and spec.modification_problem(changes) is None
    _, state = await _run(spec, tmp_path)
    done = await _decide(spec, state, tmp_path, HumanDecision.MODIFY, changes)
    assert done.status is LoopStatus.COMPLETED, done.reason
    assert gh.labels_of(REPO, 1) == [] and gh.labels_of(REPO, 4) == ["P0", "stale"]


@pytest.mark.parametrize(("changes", "problem"), [
    ({"context": {"label": {"#4": "P9"}}},
     "label.#4: P9 is not a label daily-triage adds; the labels it may add: P0, P1, P2, stale, needs-reviewer"),
    ({"context": {"label": {"#4": ""}}}, "label.#4: no label given"),
    ({"context": {"label": {"four": "P1"}}}, "label.four: name an issue, e.g. label.#12=P1"),
    ({"context": {"label": "P1"}}, "label takes an issue after it"),
    ({"context": {"skip": "all of them"}}, "skip names no issue numbers"),
])
def test_a_change_triage_would_drop_is_refused_when_voted(gh: TriageGitHub, tmp_path: Path,
                                                          changes: dict[str, Any], problem: str) -> None:
    spec = _spec(gh, tmp_path)
    assert spec.modification_problem is not None
    assert (spec.modification_problem(changes) or "").startswith(problem)
    assert spec.modification_problem({"context": {"label": {"#4": "P1, stale"}, "skip": [1, "#3"]}}) is None


def test_other_bare_keys_are_still_refused() -> None:
    refused = parse_command("modify note=x")
    assert isinstance(refused, Exception) and "modify cannot change 'note'" in str(refused)
    block = parse_command('modify ```json\n{"skip": "#2", "context": {"label": {"#3": "P1"}}}\n```')
    assert _modifications(block) == {"context": {"label": {"#3": "P1"}, "skip": "#2"}}
