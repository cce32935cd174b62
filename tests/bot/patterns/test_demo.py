"""The built-in demo loop: deterministic, pauses once before applying, and each decision ends it as promised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.patterns import LoopSpec, PatternError, get_pattern
from bot.patterns.demo import STEPS, _labels_for
from loop_engine.checkpoint import (
    CheckpointConfig,
    CheckpointPresets,
    CheckpointTrigger,
    HumanCheckpoint,
    HumanDecision,
    ReviewResponse,
)
from loop_engine.proposal import ChangeList, Table
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import state_to_dict
from loop_engine.types import LoopResult, LoopState, LoopStatus, StepStatus

STEP_IDS = [step_id for step_id, _ in STEPS]


def demo(items: int = 3) -> LoopSpec:
    return get_pattern("demo")({"items": items})


def checkpoint(tmp_path: Path, **fields: object) -> HumanCheckpoint:
    return HumanCheckpoint(CheckpointConfig(checkpoint_dir=tmp_path / "checkpoints", **fields))  # type: ignore[arg-type]


def through_json(state: LoopState) -> LoopState:
    """What the runner does between processes: snapshot to JSON and back."""
    return state_from_dict(json.loads(json.dumps(state_to_dict(state))))


async def run_until_pause(spec: LoopSpec, tmp_path: Path) -> tuple[LoopResult, LoopState]:
    engine = spec.engine_factory(checkpoint=checkpoint(tmp_path))
    result = await engine.run(spec.context_factory(), trace_id="demo-run-1")
    return result, engine.state


async def decide(
    spec: LoopSpec, state: LoopState, decision: HumanDecision, tmp_path: Path, **extra: object
) -> LoopResult:
    """Resume in a fresh engine, as a restarted bot would."""
    result, _ = await decide_with_state(spec, state, decision, tmp_path, **extra)
    return result


async def decide_with_state(spec: LoopSpec, state: LoopState, decision: HumanDecision, tmp_path: Path,
                            **extra: object) -> tuple[LoopResult, LoopState]:
    assert state.pending_review is not None
    response = ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=decision,
                              reviewer="local:alice", **extra)  # type: ignore[arg-type]
    engine = spec.engine_factory(checkpoint=checkpoint(tmp_path))
    result = await engine.resume(through_json(state), response)
    return result, engine.state


def statuses(result: LoopResult) -> dict[str, StepStatus]:
    assert result.plan is not None
    return {step.id: step.status for step in result.plan.steps}


async def test_pauses_once_before_applying(tmp_path: Path) -> None:
    result, state = await run_until_pause(demo(), tmp_path)
    assert result.status is LoopStatus.PAUSED
    request = result.review_request
    assert request is not None and request.checkpoint_id == "checkpoint_0001"
    assert request.trigger is CheckpointTrigger.ON_EXTERNAL_REQUEST
    assert request.proposed_action == "Continue with step apply: Apply labels"
    assert request.context["reason"] == "apply 3 labels to 3 issues"
    assert statuses(result) == {"collect": StepStatus.VERIFIED_COMPLETED, "propose": StepStatus.VERIFIED_COMPLETED,
                                "apply": StepStatus.PENDING, "report": StepStatus.PENDING}
    assert state.pending_review == request


async def test_approve_completes_every_step(tmp_path: Path) -> None:
    _, state = await run_until_pause(demo(), tmp_path)
    result = await decide(demo(), state, HumanDecision.APPROVE, tmp_path)
    assert result.status is LoopStatus.COMPLETED
    assert result.review_request is None
    assert statuses(result) == dict.fromkeys(STEP_IDS, StepStatus.VERIFIED_COMPLETED)
    assert result.output["report"] == {"summary": "labelled 3 issues",
                                       "labels": {"bug": 1, "documentation": 1, "enhancement": 1}}
    assert result.output["apply"]["applied"] == result.output["propose"]["proposals"]
    json.dumps(result.output)  # JSON values only
    assert result.iterations == 4


async def test_reject_ends_failed_with_the_reason_and_applies_nothing(tmp_path: Path) -> None:
    _, state = await run_until_pause(demo(), tmp_path)
    result = await decide(demo(), state, HumanDecision.REJECT, tmp_path, feedback="labels are wrong")
    assert result.status is LoopStatus.FAILED
    assert result.reason == "labels are wrong"
    assert statuses(result)["apply"] is StepStatus.PENDING
    assert "apply" not in result.output


async def test_retry_proposes_again_and_asks_again(tmp_path: Path) -> None:
    _, state = await run_until_pause(demo(), tmp_path)
    result, state = await decide_with_state(demo(), state, HumanDecision.RETRY, tmp_path)
    assert result.status is LoopStatus.PAUSED
    assert result.review_request is not None and result.review_request.checkpoint_id == "checkpoint_0002"
    final = await decide(demo(), state, HumanDecision.APPROVE, tmp_path)
    assert final.status is LoopStatus.COMPLETED
    assert statuses(final) == dict.fromkeys(STEP_IDS, StepStatus.VERIFIED_COMPLETED)


async def test_modify_continues_and_pause_keeps_waiting(tmp_path: Path) -> None:
    _, state = await run_until_pause(demo(), tmp_path)
    modified = await decide(demo(), state, HumanDecision.MODIFY, tmp_path, modifications={"context": {"note": "ok"}})
    assert modified.status is LoopStatus.COMPLETED
    paused = await decide(demo(), state, HumanDecision.PAUSE, tmp_path, feedback="2h")
    assert paused.status is LoopStatus.PAUSED
    assert paused.review_request is not None and paused.review_request.checkpoint_id == "checkpoint_0001"


async def test_the_run_is_deterministic(tmp_path: Path) -> None:
    outputs = []
    for attempt in range(2):
        _, state = await run_until_pause(demo(5), tmp_path / str(attempt))
        result = await decide(demo(5), state, HumanDecision.APPROVE, tmp_path / str(attempt))
        outputs.append(result.output)
    assert outputs[0] == outputs[1]
    assert outputs[0]["report"]["summary"] == "labelled 5 issues"


async def test_a_disabled_checkpoint_runs_straight_through(tmp_path: Path) -> None:
    spec = demo()
    engine = spec.engine_factory(checkpoint=HumanCheckpoint(CheckpointPresets.disabled()))
    result = await engine.run(spec.context_factory())
    assert result.status is LoopStatus.COMPLETED
    assert statuses(result) == dict.fromkeys(STEP_IDS, StepStatus.VERIFIED_COMPLETED)


async def test_engine_factory_builds_a_fresh_engine_each_time_and_uses_persistence(tmp_path: Path) -> None:
    saved: list[str] = []

    class Sink:
        def save(self, state: LoopState, trace_id: str | None = None) -> None:
            saved.append(state.execution_state.value)

    spec = demo()
    first, second = spec.engine_factory(), spec.engine_factory(persistence=Sink())
    assert first is not second
    result = await second.run(spec.context_factory())
    assert result.status is LoopStatus.PAUSED  # the default checkpoint still asks
    assert saved[-1] == "waiting_for_human"


@pytest.mark.parametrize(
    ("options", "message"),
    [({"items": 0}, "from 1 to 100"), ({"items": 101}, "from 1 to 100"), ({"items": "3"}, "from 1 to 100"),
     ({"items": True}, "from 1 to 100"), ({"itmes": 3}, "unknown option(s) itmes; known options: items")],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")):
        get_pattern("demo")(options)


def test_default_options() -> None:
    assert get_pattern("demo")({}).context_factory().initial_context == {"items": 3}


@pytest.mark.parametrize(
    ("title", "labels"),
    [
        ("Crash on save", ["bug"]),
        ("Debug logging is verbose", ["needs-triage"]),
        ("Slow docs build", ["documentation", "performance"]),
        ("Address book", ["needs-triage"]),
    ],
)
def test_labels_match_whole_words(title: str, labels: list[str]) -> None:
    assert _labels_for(title) == labels


async def test_the_review_carries_the_proposal_as_data(tmp_path: Path) -> None:
    """Issue 18.1: which labels on which issue, as a table and a list, not only a reason."""
    result, state = await run_until_pause(demo(), tmp_path)
    request = result.review_request
    assert request is not None and request.proposal is not None
    assert request.proposal.summary == "Approve to apply 3 labels to 3 issues"
    table, changes = request.proposal.sections
    assert isinstance(table, Table) and table.columns == ("Issue", "Title", "Labels to add")
    assert table.rows[0] == ("#1", "Crash when saving a file with a long name", "bug")
    assert isinstance(changes, ChangeList) and changes.items[1] == "#2: add enhancement"
    assert through_json(state).pending_review == request  # the snapshot keeps it
    text = request.to_markdown()
    assert text.index("## Context") < text.index("## Proposal") and "| #3 | Docs: the install guide" in text


async def test_the_runs_end_is_worded_by_its_summarize_hook(tmp_path: Path) -> None:
    spec = demo()
    assert spec.summarize is not None
    result, state = await run_until_pause(spec, tmp_path)
    approved = await decide(spec, state, HumanDecision.APPROVE, tmp_path)
    assert spec.summarize(approved) == "labelled 3 issues: bug 1, documentation 1, enhancement 1"
    rejected = await decide(spec, state, HumanDecision.REJECT, tmp_path, feedback="no")
    assert spec.summarize(rejected) == "proposed labels for 3 issues; none applied"
