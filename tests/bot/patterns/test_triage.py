"""daily-triage against a fake GitHub with 1,000+ issues and PRs: propose, ask once, apply what still holds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.patterns import LoopSpec, PatternError, get_pattern
from bot.patterns.triage import TriageSpec, build
from bot.patterns.triage.components import AllowedActionsGate
from bot.patterns.triage.rules import Item, Rules
from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint, HumanDecision, ReviewResponse
from loop_engine.gates.base import GateContext
from loop_engine.proposal import ChangeList, Table, Text
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import state_to_dict
from loop_engine.types import LoopResult, LoopState, LoopStatus
from tests.fakes.github_triage import TriageGitHub, days_ago

REPO = "octo/ops"
NOW = datetime.now(UTC)
TITLES = [
    ("Crash on start", "P1"), ("Security hole in login", "P0"), ("Add a debug flag", "P2"),
    ("bugfix: typo in docs", "P2"), ("Production   down after deploy", "P0"), ("A BUG in the parser", "P1"),
    ("Regression: slow export", "P1"), ("Question about data-loss docs", "P2"), ("Feature: dark mode", "P2"),
]


def expected_priority(title: str, body: str) -> str:
    return Rules().priority(title, body)[0]


def backlog(size: int = 1_050) -> list[dict[str, Any]]:
    """``size`` items: issues with tricky titles, some already prioritised, some stale; every 10th a PR."""
    specs: list[dict[str, Any]] = []
    for n in range(1, size + 1):
        title, _ = TITLES[n % len(TITLES)]
        spec: dict[str, Any] = {"number": n, "title": f"{title} ({n})", "body": "see the logs",
                                "updated_at": days_ago(1, NOW)}
        if n % 10 == 0:
            spec.update(pr=True, title=f"Fix things ({n})", reviewers=["bob"] if n % 20 == 0 else [])
        elif n % 7 == 0:
            spec["labels"] = ["P1"]  # a person prioritised it already: left alone
        if n % 13 == 0 and not spec.get("pr"):
            spec["updated_at"] = days_ago(45, NOW)  # stale
        if n == 3:
            spec["body"] = "outage in eu-west"  # a body keyword counts
        specs.append(spec)
    return specs


def expected_labels(spec: dict[str, Any]) -> list[str]:
    if spec.get("pr"):
        return [] if spec["reviewers"] else ["needs-reviewer"]
    labels = [] if spec.get("labels") else [expected_priority(spec["title"], spec["body"])]
    if spec["updated_at"] < days_ago(30, NOW):
        labels.append("stale")
    return labels


@pytest.fixture
def gh() -> Iterator[TriageGitHub]:
    with TriageGitHub() as fake:
        fake.bulk(REPO, backlog())
        yield fake


def spec_for(gh: TriageGitHub, tmp_path: Path, slept: list[float] | None = None, **options: Any) -> LoopSpec:
    def sleep(seconds: float) -> None:
        if slept is not None:
            slept.append(seconds)
        time.sleep(min(seconds, 0.2))

    settings = {"repository": REPO, "base_url": gh.base_url, "state_dir": str(tmp_path / "state"),
                "max_changes": 5_000, "writes_per_minute": None, "writes_per_hour": None, **options}
    return build(settings, environ={"GITHUB_TOKEN": "ghp_test"}, sleep=sleep)


def checkpoint(tmp_path: Path) -> HumanCheckpoint:
    return HumanCheckpoint(CheckpointConfig(checkpoint_dir=tmp_path / "checkpoints"))


def through_json(state: LoopState) -> LoopState:
    return state_from_dict(json.loads(json.dumps(state_to_dict(state))))


async def propose(spec: LoopSpec, tmp_path: Path) -> tuple[LoopResult, LoopState]:
    engine = spec.engine_factory(checkpoint=checkpoint(tmp_path))
    result = await engine.run(spec.context_factory(), trace_id="daily-triage-run-1")
    return result, engine.state


async def decide(spec: LoopSpec, state: LoopState, decision: HumanDecision, tmp_path: Path,
                 **extra: Any) -> tuple[LoopResult, LoopState]:
    assert state.pending_review is not None
    response = ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=decision,
                              reviewer="local:alice", **extra)
    engine = spec.engine_factory(checkpoint=checkpoint(tmp_path))  # a fresh engine, as after a restart
    result = await engine.resume(through_json(state), response)
    return result, engine.state


def label_posts(gh: TriageGitHub) -> list[Any]:
    return gh.calls_to("POST", r"/issues/\d+/labels$")


def report_of(result: LoopResult) -> dict[str, Any]:
    report = result.output["report"]
    assert isinstance(report, dict)
    data = json.loads(Path(report["files"]["json"]).read_text())
    assert isinstance(data, dict)
    return data


# --- rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("title", "body", "priority"), [
    ("Add a debug flag", "", "P2"),
    ("bugfix for the parser", "", "P2"),
    ("bugs everywhere", "", "P2"),
    ("A BUG in the parser", "", "P1"),
    ("bug: parser", "", "P1"),
    ("parser (bug)", "", "P1"),
    ("Crash!", "", "P1"),
    ("crashed on start", "", "P2"),
    ("Docs", "possible DATA\nLOSS when saving", "P0"),
    ("dataloss", "", "P2"),
    ("Security bug in login", "", "P0"),  # the highest priority wins
    ("insecurity", "", "P2"),
    ("nothing here", "a regression since 2.1", "P1"),
])
def test_keywords_match_whole_words_case_insensitive(title: str, body: str, priority: str) -> None:
    assert Rules().priority(title, body)[0] == priority


def test_judgements_labelled_stale_and_prs() -> None:
    rules = Rules(labels={"P0": "urgent"})
    now = NOW
    fresh, old = days_ago(1, now), days_ago(31, now)
    assert rules.judge(Item(1, "Security hole", updated_at=fresh), now).add == ["urgent"]
    assert rules.judge(Item(2, "Crash", labels=("P2",), updated_at=fresh), now).add == []  # left alone
    assert rules.judge(Item(3, "Crash", labels=("P2",), updated_at=old), now).add == ["stale"]
    assert rules.judge(Item(4, "Crash", updated_at=old), now).add == ["P1", "stale"]
    assert rules.judge(Item(5, "Security fix", is_pr=True, updated_at=old), now).add == ["needs-reviewer"]
    assert rules.judge(Item(6, "Fix", is_pr=True, reviewers=("bob",)), now).add == []
    assert rules.judge(Item(7, "Fix", is_pr=True, assignees=("bob",)), now).add == []


def test_gate_refuses_anything_but_adding_allowed_labels_and_commenting() -> None:
    gate = AllowedActionsGate(Rules().allowed_labels)

    def verdict(**metadata: Any) -> bool:
        return gate.check(GateContext(metadata=metadata)).passed

    assert verdict(action="add_labels", labels=["P1", "stale"])
    assert verdict(action="comment")
    assert not verdict(action="add_labels", labels=["wontfix"])
    assert not verdict(action="add_labels", labels=[])
    for action in ("close", "merge", "remove_label", "set_labels", "transfer", None):
        assert not verdict(action=action, labels=["P1"]), action


# --- the loop against the fake -------------------------------------------------------------------------


async def test_approve_applies_exactly_the_proposed_labels(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    result, state = await propose(spec, tmp_path)
    assert result.status is LoopStatus.PAUSED
    assert not label_posts(gh)  # nothing before the review
    pages = gh.calls_to("GET", rf"/repos/{REPO}/issues$")
    assert len(pages) == 11  # 1,050 items, 100 a page
    specs = {s["number"]: s for s in backlog()}
    expected = {n: expected_labels(s) for n, s in specs.items() if expected_labels(s)}
    assert result.plan is not None
    changes = [s for s in result.plan.steps if s.metadata.get("kind") == "change"]
    assert len(changes) == len(expected) > 800  # one plan step per proposed change
    request = result.review_request
    assert request is not None and request.proposal is not None  # the whole proposal, as data (issue 18.1)
    n = len(expected)
    assert request.proposal.summary == request.context["reason"] == f"Approve to apply {n:,} label changes to {REPO}"
    rows = next(s for s in request.proposal.sections if isinstance(s, Table)).rows
    assert {int(row[0].removeprefix("PR ").lstrip("#")): row[2].split(", ") for row in rows} == expected
    assert "/triage/" not in request.to_markdown()  # no path on the server
    files = result.plan.get_step("propose").output["files"]  # type: ignore[union-attr]
    assert files["json"].startswith(str(tmp_path / "state/triage/octo__ops/"))
    table = json.loads(Path(files["json"]).read_text())
    assert f"| #3 | {backlog()[2]['title']} | P0 |" in Path(files["markdown"]).read_text()
    assert {row["number"]: row["labels"] for row in table["changes"]} == expected

    result, _ = await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    assert result.status is LoopStatus.COMPLETED, result.reason
    for number, spec_ in specs.items():
        assert gh.labels_of(REPO, number) == list(spec_.get("labels", [])) + expected.get(number, []), number
    assert len(label_posts(gh)) == len(expected)  # one write per changed issue
    report = report_of(result)
    assert report["applied"] == len(expected) and report["skipped"] == 0
    assert report["priorities"]["P0"] > 0 and report["stale"] > 0 and report["prs_needing_reviewers"] == 53
    assert Path(report["files"]["markdown"]).read_text().startswith("# Triage report for octo/ops")
    assert spec.summarize is not None and spec.summarize(result) == result.output["report"]["summary"]
    assert spec.summarize(result).startswith(f"triage of {REPO}: applied {len(expected):,} change(s)")


async def test_reject_applies_nothing(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    _, state = await propose(spec, tmp_path)
    result, _ = await decide(spec, state, HumanDecision.REJECT, tmp_path, feedback="not today")
    assert result.status is LoopStatus.FAILED and result.reason == "not today"
    assert not label_posts(gh)
    assert spec.summarize is not None and result.plan is not None
    proposed = sum(1 for step in result.plan.steps if step.metadata.get("kind") == "change")
    assert spec.summarize(result) == f"triage of {REPO}: proposed {proposed:,} change(s), applied none"


async def test_modify_skips_and_overrides(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    _, state = await propose(spec, tmp_path)
    # what `modify context.skip=#1,#2 context.label.#4=P0,stale context.label.#5=wontfix` becomes
    changes = {"context": {"skip": "#1,#2", "label": {"#4": "P0,stale", "#5": "wontfix", "#999999": "P1"}}}
    result, _ = await decide(spec, state, HumanDecision.MODIFY, tmp_path, modifications=changes)
    assert result.status is LoopStatus.COMPLETED, result.reason
    assert gh.labels_of(REPO, 1) == [] and gh.labels_of(REPO, 2) == []
    assert gh.labels_of(REPO, 4) == ["P0", "stale"]
    assert gh.labels_of(REPO, 5) == []  # not an allowed label: refused, reported
    assert gh.labels_of(REPO, 6) == ["P1"]  # the rest as proposed
    report = report_of(result)
    skipped = {c["number"]: c["reason"] for c in report["skipped_changes"]}
    assert skipped[1] == skipped[2] == "skipped by the reviewer"
    assert "wontfix" in skipped[5] and "not in the configured set" in skipped[5]
    assert report["notes"] == ["label.#999999 ignored: #999999 was not in the proposal"]


async def test_a_second_run_proposes_nothing_already_handled(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    _, state = await propose(spec, tmp_path)
    await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    gh.bulk(REPO, [{"number": 5000, "title": "New crash", "updated_at": days_ago(0, NOW)}])
    writes = len(label_posts(gh))
    result, _ = await propose(spec, tmp_path)
    assert result.plan is not None
    assert [s.id for s in result.plan.steps if s.metadata.get("kind") == "change"] == ["change-5000"]
    assert len(label_posts(gh)) == writes


async def test_a_second_run_after_reject_asks_nothing(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    _, state = await propose(spec, tmp_path)
    await decide(spec, state, HumanDecision.REJECT, tmp_path, feedback="no")
    result, _ = await propose(spec, tmp_path)
    assert result.status is LoopStatus.COMPLETED  # nothing changed: no review, nothing applied
    assert report_of(result)["proposed"] == 0 and not label_posts(gh)


async def test_changes_made_by_people_meanwhile_are_skipped_and_reported(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = spec_for(gh, tmp_path)
    _, state = await propose(spec, tmp_path)
    gh.close(REPO, 1)
    gh.person_labels(REPO, 2, "P0", login="carol")
    gh.person_labels(REPO, 4, "wontfix", login="carol")
    result, _ = await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    assert result.status is LoopStatus.COMPLETED, result.reason
    assert gh.labels_of(REPO, 1) == [] and gh.labels_of(REPO, 2) == ["P0"] and gh.labels_of(REPO, 4) == ["wontfix"]
    skipped = {c["number"]: c["reason"] for c in report_of(result)["skipped_changes"]}
    assert skipped == {1: "closed since the proposal",
                       2: "labelled since the proposal by someone else (P0)",
                       4: "labelled since the proposal by someone else (wontfix)"}
    assert "P1" in gh.labels_of(REPO, 6)


async def test_rate_limits_are_waited_out_without_losing_the_proposal(gh: TriageGitHub, tmp_path: Path) -> None:
    slept: list[float] = []
    spec = spec_for(gh, tmp_path, slept)
    gh.rate_limit("GET", rf"/repos/{REPO}/issues$", retry_after=0.05, times=1)
    result, state = await propose(spec, tmp_path)
    assert result.status is LoopStatus.PAUSED
    assert len(gh.calls_to("GET", rf"/repos/{REPO}/issues$")) == 12  # the limited page again, no other
    gh.rate_limit("POST", r"/issues/\d+/labels$", retry_after=0.05, times=2)
    result, _ = await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    assert result.status is LoopStatus.COMPLETED, result.reason
    assert slept == [0.05, 0.05, 0.05]
    report = report_of(result)
    assert report["skipped"] == 0 and report["applied"] == len(label_posts(gh)) - 2


async def test_writes_are_paced_with_a_progress_line(gh: TriageGitHub, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    slept: list[float] = []
    spec = spec_for(gh, tmp_path, slept, writes_per_minute=400, max_changes=10, progress_every=5)
    _, state = await propose(spec, tmp_path)
    with caplog.at_level("INFO", logger="bot.patterns.triage"):
        result, _ = await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    assert result.status is LoopStatus.COMPLETED
    assert len(label_posts(gh)) == 10
    assert "10/10 change(s) done (100%)" in caplog.text and "5/10 change(s) done (50%)" in caplog.text
    assert report_of(result)["left_for_next_run"] > 800  # max_changes: the rest is proposed next run
    result, _ = await propose(spec, tmp_path)
    assert result.plan is not None and len(result.plan.steps) == 10 + 3


def test_pacer_keeps_to_both_windows() -> None:
    from bot.patterns.triage.github import Pacer

    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    pacer = Pacer(80, 500, clock=lambda: now[0], sleep=sleep)
    moments = []
    for _ in range(600):
        pacer.wait()
        moments.append(now[0])
    for i in range(len(moments) - 80):
        assert moments[i + 80] - moments[i] >= 60.0
    for i in range(len(moments) - 500):
        assert moments[i + 500] - moments[i] >= 3600.0
    assert moments[79] == 0.0 and moments[80] == 60.0


def test_inactive_until_token_and_repository_are_set() -> None:
    spec = get_pattern("daily-triage")({"repository": ""})
    assert isinstance(spec, TriageSpec) and spec.inactive is not None
    assert "options.repository is empty" in spec.inactive
    assert build({"repository": REPO}, environ={}).inactive == (  # type: ignore[attr-defined]
        "GITHUB_TOKEN is not set; set it (or give the bot a github: block) to enable it")
    assert build({"repository": REPO}, environ={"GITHUB_TOKEN": "x"}).inactive is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(("options", "message"), [
    ({"repo": "x/y"}, "unknown option(s) repo"),
    ({"repository": "nope"}, "owner/name"),
    ({"max_changes": 0}, "max_changes"),
    ({"keywords": {"P0": "security"}}, "keywords"),
    ({"labels": {"P9": "x"}}, "P9"),
])
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(PatternError, match=re.escape(message)):
        build(options)


def test_the_proposal_holds_every_change_whole_with_what_each_answer_does() -> None:
    """Issue 18.1: not a table flattened into one cell and cut; every row, every cell as it is."""
    from bot.patterns.triage.report import ANSWERS, proposal_of

    rows = [{"number": n, "title": "x | y\n" * 30, "labels": ["P1", "stale"], "why": ['"crash" in the title'],
             "is_pr": n % 2 == 1} for n in range(2_000)]
    proposal = proposal_of(REPO, rows, {"open_issues": 2_000, "proposed_labels": {"P1": 2_000, "P2": 0}})
    assert proposal.summary == f"Approve to apply 2,000 label changes to {REPO}"
    overview, table, counts, answers = proposal.sections
    assert isinstance(overview, Text) and "2,000 change(s) proposed" in overview.markdown
    assert isinstance(table, Table) and table.columns == ("Issue", "Title", "Labels to add", "Why")
    assert len(table.rows) == 2_000 and table.rows[1] == ("PR #1", "x | y\n" * 30, "P1, stale", '"crash" in the title')
    assert isinstance(counts, ChangeList) and counts.items == ("P1: 2,000 issue(s)",)
    assert isinstance(answers, ChangeList) and answers.items == ANSWERS
    one = proposal_of(REPO, rows[:1], {})
    assert one.summary == f"Approve to apply 1 label change to {REPO}" and len(one.sections) == 3
