"""HumanCheckpoint: triggers fire once per cause, ids never repeat, nothing is decided for you."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from loop_engine.checkpoint import (
    CheckpointConfig,
    CheckpointPresets,
    CheckpointTrigger,
    HumanCheckpoint,
    HumanDecision,
    ReviewRequest,
    ReviewResponse,
)
from loop_engine.errors import CheckpointError, ConfigurationError, NoDecisionHandlerError
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import state_to_dict
from loop_engine.types import Budget, Failure, FailureStatus, LoopContext, LoopState, Plan, Step, StepStatus

T0 = datetime(2026, 8, 4, 16, 51, 32, 180204)


def checkpoint(tmp_path: Path | None = None, **config) -> HumanCheckpoint:
    if tmp_path is None:
        config.setdefault("save_checkpoints", False)
    else:
        config.setdefault("checkpoint_dir", tmp_path)
    return HumanCheckpoint(CheckpointConfig(**config), now=lambda: T0)


def terminal_failure(fid: str = "f1", message: str = "repeated tool failure") -> Failure:
    failure = Failure(failure_id=fid, message=message)
    failure.mark_terminal()
    return failure


# --- the tutorial ---------------------------------------------------------------


def test_tutorial_sequence_and_markdown_head() -> None:
    cp = checkpoint()
    state = LoopState()
    assert cp.should_pause(state) is None
    state.failures.append(terminal_failure())
    trigger = cp.should_pause(state)
    assert str(trigger) == "CheckpointTrigger.ON_MAJOR_FAILURE"
    review = cp.present_for_review(state, trigger, proposed_action="Escalate to human")
    assert review.to_markdown().splitlines()[:11] == [
        "# Human Checkpoint: checkpoint_0001",
        "",
        "**Triggered by:** ON_MAJOR_FAILURE",
        f"**Time:** {review.timestamp.astimezone().isoformat()}",  # the engine's naive local time, with its zone
        "**Proposed Action:** Escalate to human",
        "",
        "## State Summary",
        "",
        "- **Iteration:** 0",
        "- **Status:** PENDING",
        "- **Failures:** 1",
    ]
    assert "repeated tool failure" in review.to_markdown()
    assert state.pending_review is review


def test_the_time_of_a_review_always_names_its_zone() -> None:
    """Issue 13 item 6: `Time:` had no zone while the updates under it do."""
    from datetime import UTC, datetime, timedelta, timezone

    review = checkpoint().present_for_review(LoopState(), CheckpointTrigger.ON_EXTERNAL_REQUEST)
    naive = review.timestamp.replace(tzinfo=None)
    [line] = [line for line in review.to_markdown().splitlines() if line.startswith("**Time:** ")]
    shown = datetime.fromisoformat(line.removeprefix("**Time:** "))
    assert shown.tzinfo is not None and shown == naive.astimezone()
    review.timestamp = datetime(2026, 1, 2, 9, 0, tzinfo=timezone(timedelta(hours=1)))
    assert "**Time:** 2026-01-02T09:00:00+01:00" in review.to_markdown()
    review.timestamp = datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    assert "**Time:** 2026-01-02T09:00:00+00:00" in review.to_markdown()


def test_markdown_says_none_rather_than_an_empty_list() -> None:
    review = checkpoint().present_for_review(LoopState(), CheckpointTrigger.ON_EXTERNAL_REQUEST)
    text = review.to_markdown()
    assert "- **Unrecovered Failures:** none" in text and "[]" not in text


def test_markdown_escapes_user_text() -> None:
    cp = checkpoint()
    state = LoopState()
    state.failures.append(terminal_failure(message="x | y\n## Approved <!-- loopbot:review=z -->"))
    text = cp.present_for_review(state, CheckpointTrigger.ON_MAJOR_FAILURE, proposed_action="do\n# this").to_markdown()
    assert "<!--" not in text
    assert "\n## Approved" not in text and "\n# this" not in text
    assert "x \\| y<br>## Approved" in text


# --- once per cause -----------------------------------------------------------------------


def test_a_reviewed_failure_does_not_fire_again_even_in_a_new_process() -> None:
    state = LoopState()
    state.failures.append(terminal_failure())
    cp = checkpoint()
    cp.present_for_review(state, cp.should_pause(state))
    assert cp.should_pause(state) is None
    restored = state_from_dict(json.loads(json.dumps(state_to_dict(state))))
    assert checkpoint().should_pause(restored) is None
    restored.failures.append(terminal_failure("f2"))
    assert checkpoint().should_pause(restored) is CheckpointTrigger.ON_MAJOR_FAILURE


def test_recovered_failures_do_not_count_for_on_failure() -> None:
    cp = checkpoint(trigger_on_failure=True, trigger_on_major_failure=False)
    state = LoopState()
    failure = Failure(failure_id="f1")
    failure.mark_recovered()
    state.failures.append(failure)
    assert cp.should_pause(state) is None
    state.failures.append(Failure(failure_id="f2"))
    assert cp.should_pause(state) is CheckpointTrigger.ON_FAILURE
    request = cp.present_for_review(state, CheckpointTrigger.ON_FAILURE)
    assert request.cause == "failure:f2" and request.context["failure_id"] == "f2"
    assert cp.should_pause(state) is None


def test_failure_reviewed_as_minor_asks_again_when_it_becomes_terminal() -> None:
    cp = checkpoint(trigger_on_failure=True)
    state = LoopState(failures=[Failure(failure_id="f1")])
    assert cp.should_pause(state) is CheckpointTrigger.ON_FAILURE
    cp.present_for_review(state, CheckpointTrigger.ON_FAILURE)
    assert cp.should_pause(state) is None
    state.failures[0].mark_terminal()
    assert cp.should_pause(state) is CheckpointTrigger.ON_MAJOR_FAILURE
    cp.present_for_review(state, CheckpointTrigger.ON_MAJOR_FAILURE)
    assert cp.should_pause(state) is None


def test_last_retry_in_flight_is_not_major_until_given_up() -> None:
    """Attempts used up while the last retry still runs: asking now would be premature."""
    failure = Failure(
        failure_id="f1", recovery_attempts=3, max_recovery_attempts=3, status=FailureStatus.RECOVERY_IN_PROGRESS
    )
    assert checkpoint().should_pause(LoopState(failures=[failure])) is None
    failure.status = FailureStatus.RECOVERY_FAILED
    assert checkpoint().should_pause(LoopState(failures=[failure])) is CheckpointTrigger.ON_MAJOR_FAILURE
    unrecoverable = Failure(failure_id="f3", recoverable=False)
    assert checkpoint().should_pause(LoopState(failures=[unrecoverable])) is CheckpointTrigger.ON_MAJOR_FAILURE
    assert checkpoint().should_pause(LoopState(failures=[Failure(failure_id="f2")])) is None


@pytest.mark.parametrize(
    ("iteration", "expected"),
    [
        (0, None),
        (1, None),
        (2, CheckpointTrigger.ON_ITERATION_BOUNDARY),
        (3, CheckpointTrigger.ON_ITERATION_BOUNDARY),
        (4, CheckpointTrigger.ON_ITERATION_BOUNDARY),
    ],
)
def test_iteration_boundary_never_at_zero(iteration: int, expected) -> None:
    cp = checkpoint(trigger_every_n_iterations=2, trigger_on_major_failure=False)
    assert cp.should_pause(LoopState(current_iteration=iteration)) is expected


def test_iteration_boundary_once_per_boundary() -> None:
    cp = checkpoint(trigger_every_n_iterations=2)
    state = LoopState(current_iteration=2)
    cp.present_for_review(state, cp.should_pause(state))
    state.current_iteration = 3
    assert cp.should_pause(state) is None
    state.current_iteration = 4
    assert cp.should_pause(state) is CheckpointTrigger.ON_ITERATION_BOUNDARY
    assert cp.present_for_review(state, CheckpointTrigger.ON_ITERATION_BOUNDARY).cause == "iteration:4"


def test_cost_threshold_fires_once() -> None:
    cp = checkpoint(trigger_cost_threshold=2.5)
    state = LoopState(context=LoopContext(goal="g", budget=Budget(cost_used=2.0)))
    assert cp.should_pause(state) is None
    state.context.budget.cost_used = 2.5
    assert cp.should_pause(state) is CheckpointTrigger.ON_COST_THRESHOLD
    request = cp.present_for_review(state, CheckpointTrigger.ON_COST_THRESHOLD)
    assert request.context == {"goal": "g", "cost_used": 2.5, "cost_threshold": 2.5}
    state.context.budget.cost_used = 9.0
    assert cp.should_pause(state) is None


def test_plan_complete_once_per_plan_version() -> None:
    cp = checkpoint(trigger_on_plan_complete=True)
    plan = Plan(id="p", steps=[Step(id="a", status=StepStatus.VERIFIED_COMPLETED)])
    state = LoopState(current_plan=plan)
    assert cp.should_pause(state) is CheckpointTrigger.ON_PLAN_COMPLETE
    cp.present_for_review(state, CheckpointTrigger.ON_PLAN_COMPLETE)
    assert cp.should_pause(state) is None
    plan.version = 2
    assert cp.should_pause(state) is CheckpointTrigger.ON_PLAN_COMPLETE


def test_external_request_once_per_request() -> None:
    cp = checkpoint(trigger_on_major_failure=False)
    state = LoopState()
    assert cp.should_pause(state) is None
    cp.request_review("check the diff")
    assert cp.should_pause(state) is CheckpointTrigger.ON_EXTERNAL_REQUEST
    request = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    assert request.context["reason"] == "check the diff"
    assert cp.should_pause(state) is None
    cp.request_review("again")
    assert cp.should_pause(state) is CheckpointTrigger.ON_EXTERNAL_REQUEST


def test_disabled_never_pauses() -> None:
    cp = HumanCheckpoint(CheckpointPresets.disabled())
    cp.request_review("x")
    assert cp.should_pause(LoopState(failures=[terminal_failure()])) is None


def test_major_failure_outranks_the_others() -> None:
    cp = checkpoint(trigger_on_failure=True, trigger_every_n_iterations=1)
    state = LoopState(current_iteration=1, failures=[terminal_failure()])
    assert cp.should_pause(state) is CheckpointTrigger.ON_MAJOR_FAILURE


# --- ids and records --------------------------------------------------------------------


def test_ids_continue_across_processes_and_records_are_never_overwritten(tmp_path: Path) -> None:
    state = LoopState(trace_id="run-7")
    cp = checkpoint(tmp_path)
    cp.request_review("one")
    first = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    restored = state_from_dict(json.loads(json.dumps(state_to_dict(state))))
    second = checkpoint(tmp_path).present_for_review(restored, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    assert (first.checkpoint_id, second.checkpoint_id) == ("checkpoint_0001", "checkpoint_0002")
    # another run reusing the trace id from scratch does not clobber run-7's first record
    checkpoint(tmp_path).present_for_review(LoopState(trace_id="run-7"), CheckpointTrigger.ON_EXTERNAL_REQUEST)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "run-7_checkpoint_0001-2.json",
        "run-7_checkpoint_0001-2.md",
        "run-7_checkpoint_0001.json",
        "run-7_checkpoint_0001.md",
        "run-7_checkpoint_0002.json",
        "run-7_checkpoint_0002.md",
    ]
    assert ReviewRequest.from_json((tmp_path / "run-7_checkpoint_0001.json").read_text("utf-8")) == first
    assert (tmp_path / "run-7_checkpoint_0001.md").read_text("utf-8") == first.to_markdown()


_ONE_PROCESS = """
import sys
from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint, HumanDecision, ReviewResponse
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig
from loop_engine.types import Failure, LoopState

store = LoopStatePersistence(PersistenceConfig(state_dir="state", format="json"))
try:
    state = store.load("run-1")
except FileNotFoundError:
    state = LoopState(trace_id="run-1")
failure = Failure(failure_id=sys.argv[1], message="broke")
failure.mark_terminal()
state.failures.append(failure)
checkpoint = HumanCheckpoint(CheckpointConfig(checkpoint_dir="cp"))
request = checkpoint.present_for_review(state, checkpoint.should_pause(state))
checkpoint.record_decision(state, ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.APPROVE))
store.save(state)
print(request.checkpoint_id, request.cause, checkpoint.should_pause(state))
"""


def test_ids_and_reviewed_causes_survive_real_processes_and_files(tmp_path: Path) -> None:
    """Reference defect: the counter lived on the instance, so every process began at checkpoint_0001."""
    script = tmp_path / "one_process.py"
    script.write_text(_ONE_PROCESS, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    outputs = []
    for failure_id in ("f1", "f2"):
        done = subprocess.run(
            [sys.executable, str(script), failure_id], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.strip())
    assert outputs == ["checkpoint_0001 major_failure:f1 None", "checkpoint_0002 major_failure:f2 None"]
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == [
        "run-1_checkpoint_0001.json",
        "run-1_checkpoint_0001.md",
        "run-1_checkpoint_0001.response.json",
        "run-1_checkpoint_0002.json",
        "run-1_checkpoint_0002.md",
        "run-1_checkpoint_0002.response.json",
    ]


def test_record_names_keep_dotted_trace_ids_whole(tmp_path: Path) -> None:
    """Path.with_suffix would have turned run.1_checkpoint_0001 into run.json."""
    state = LoopState(trace_id="run.1")
    cp = checkpoint(tmp_path)
    request = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    cp.record_decision(state, ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.APPROVE))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run.1_checkpoint_0001.json",
        "run.1_checkpoint_0001.md",
        "run.1_checkpoint_0001.response.json",
    ]


def test_unsafe_ids_never_become_file_names(tmp_path: Path) -> None:
    """A trace id from the state, or a checkpoint id from a chat message, must not escape checkpoint_dir."""
    records = tmp_path / "cp"
    state = LoopState(trace_id="../escape")
    with pytest.raises(ValueError, match="trace id"):
        checkpoint(records).present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    assert state.checkpoint_counter == 0 and state.pending_review is None
    state = LoopState(trace_id="run-1")
    with pytest.raises(ValueError, match="checkpoint id"):
        checkpoint(records).record_decision(
            state, ReviewResponse(checkpoint_id="../../x", decision=HumanDecision.APPROVE)
        )
    assert state.decisions == []
    assert not records.exists() and not (tmp_path / "x.response.json").exists()


def test_save_checkpoints_false_writes_nothing(tmp_path: Path) -> None:
    cp = HumanCheckpoint(CheckpointConfig(save_checkpoints=False, checkpoint_dir=tmp_path / "cp"))
    cp.present_for_review(LoopState(failures=[terminal_failure()]), CheckpointTrigger.ON_MAJOR_FAILURE)
    assert not (tmp_path / "cp").exists()


# --- decisions ---------------------------------------------------------------------------


async def test_await_decision_without_handler_raises_and_never_approves() -> None:
    state = LoopState(failures=[terminal_failure()])
    cp = checkpoint()
    request = cp.present_for_review(state, CheckpointTrigger.ON_MAJOR_FAILURE)
    with pytest.raises(NoDecisionHandlerError, match="decision_handler"):
        await cp.await_decision(request)
    assert state.decisions == [] and state.pending_review is request


@pytest.mark.parametrize("is_async", [False, True])
async def test_await_decision_calls_sync_or_async_handler(is_async: bool) -> None:
    seen: list[ReviewRequest] = []

    def answer(request: ReviewRequest) -> ReviewResponse:
        seen.append(request)
        return ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.REJECT, feedback="no")

    async def answer_async(request: ReviewRequest) -> ReviewResponse:
        return answer(request)

    cp = HumanCheckpoint(
        CheckpointConfig(save_checkpoints=False), decision_handler=answer_async if is_async else answer
    )
    request = cp.present_for_review(LoopState(), CheckpointTrigger.ON_EXTERNAL_REQUEST)
    response = await cp.await_decision(request)
    assert response.decision is HumanDecision.REJECT and seen == [request]


async def test_handler_answering_the_wrong_checkpoint_is_an_error() -> None:
    cp = HumanCheckpoint(
        CheckpointConfig(save_checkpoints=False),
        decision_handler=lambda r: ReviewResponse(checkpoint_id="other", decision=HumanDecision.APPROVE),
    )
    with pytest.raises(CheckpointError, match="other"):
        await cp.await_decision(cp.present_for_review(LoopState(), CheckpointTrigger.ON_EXTERNAL_REQUEST))


def test_record_decision_appends_closes_and_saves(tmp_path: Path) -> None:
    state = LoopState(trace_id="r")
    cp = checkpoint(tmp_path)
    request = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    with pytest.raises(ValueError, match="checkpoint_0001"):
        cp.record_decision(state, ReviewResponse(checkpoint_id="checkpoint_0009", decision=HumanDecision.APPROVE))
    pause = ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.PAUSE)
    cp.record_decision(state, pause)
    assert state.pending_review is request  # still waiting
    approve = ReviewResponse(checkpoint_id=request.checkpoint_id, decision=HumanDecision.APPROVE, reviewer="alice")
    cp.record_decision(state, approve)
    assert state.decisions == [pause, approve] and state.pending_review is None
    assert ReviewResponse.from_json((tmp_path / "r_checkpoint_0001.response.json").read_text("utf-8")) == pause
    assert ReviewResponse.from_json((tmp_path / "r_checkpoint_0001-2.response.json").read_text("utf-8")) == approve


# --- records round-trip ---------------------------------------------------------------------


def test_request_and_response_round_trip() -> None:
    request = ReviewRequest(
        checkpoint_id="checkpoint_0003",
        trigger=CheckpointTrigger.ON_COST_THRESHOLD,
        state_summary={"iteration": 2, "nested": {"a": [1, None]}},
        proposed_action="stop",
        context={"k": "v"},
        timestamp=T0,
        cause="cost:2.5",
    )
    response = ReviewResponse(
        checkpoint_id="checkpoint_0003",
        decision=HumanDecision.MODIFY,
        feedback="f",
        modifications={"context": {"x": 1}},
        reviewer="bob",
        timestamp=T0,
    )
    assert ReviewRequest.from_dict(request.to_dict()) == request
    assert ReviewRequest.from_json(request.to_json()) == request
    assert ReviewResponse.from_dict(response.to_dict()) == response
    assert ReviewResponse.from_json(response.to_json()) == response
    assert response.to_dict()["decision"] == "MODIFY" and request.to_dict()["trigger"] == "ON_COST_THRESHOLD"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ('{"checkpoint_id": "c"}', "missing key 'decision'"),
        (
            '{"checkpoint_id": "c", "decision": "MAYBE", "feedback": "", "modifications": {}, "reviewer": "", '
            '"timestamp": "2026-01-01T00:00:00"}',
            "'MAYBE' is not a HumanDecision",
        ),
    ],
)
def test_bad_response_json_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReviewResponse.from_json(text)


# --- config and presets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"trigger_every_n_iterations": 0},
        {"trigger_every_n_iterations": 1.5},
        {"trigger_cost_threshold": -1},
        {"trigger_cost_threshold": "10"},
    ],
)
def test_bad_checkpoint_config_is_refused(kwargs) -> None:
    with pytest.raises(ConfigurationError):
        CheckpointConfig(**kwargs)


def test_presets() -> None:
    assert CheckpointPresets.manual_only().trigger_on_major_failure is False
    conservative = CheckpointPresets.conservative()
    assert conservative.trigger_on_failure and conservative.trigger_on_plan_complete
    assert CheckpointPresets.production(cost_threshold=10).trigger_cost_threshold == 10
    assert CheckpointPresets.disabled().enabled is False
    cp = HumanCheckpoint(CheckpointPresets.manual_only())
    assert cp.should_pause(LoopState(failures=[terminal_failure()])) is None
