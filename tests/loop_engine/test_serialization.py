"""state_to_dict/state_from_dict: every field comes back, bad values are named."""

from __future__ import annotations

import copy
import dataclasses
import enum
import gc
import json
from collections import OrderedDict
from datetime import datetime, timedelta, timezone
from types import MappingProxyType

import orjson

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop_engine.errors import CorruptStateError
from loop_engine.jsonvalue import NotJSONSerialisableError
from loop_engine.review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import SCHEMA_VERSION, encode_state, state_to_dict
from loop_engine.types import (
    Budget,
    Evaluation,
    ExecutionState,
    Failure,
    FailureStatus,
    FailureType,
    LoopContext,
    LoopState,
    LoopStatus,
    Observation,
    Plan,
    RecoveryAction,
    RecoveryStrategy,
    Step,
    StepStatus,
)


def roundtrip(state: LoopState) -> LoopState:
    return state_from_dict(json.loads(json.dumps(state_to_dict(state))))


# --- strategies ------------------------------------------------------------------

text = st.text(max_size=12)
ids = st.text(alphabet="abcdef0123456789_-", min_size=1, max_size=8)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
json_dicts = st.dictionaries(text, json_values, max_size=3)
# Offsets down to the microsecond: orjson (which formats naive datetimes on save) would drop their seconds.
offsets = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
datetimes = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)) | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.builds(timezone, offsets)
)
opt_dt = st.none() | datetimes
opt_bool = st.none() | st.booleans()
small = st.integers(min_value=0, max_value=50)
opt_num = st.none() | st.floats(min_value=0, max_value=1e6)

steps = st.builds(
    Step,
    id=ids,
    description=text,
    dependencies=st.lists(ids, max_size=3),
    status=st.sampled_from(StepStatus),
    output=json_values,
    start_time=opt_dt,
    end_time=opt_dt,
    metadata=json_dicts,
    evaluation_passed=opt_bool,
    verification_passed=opt_bool,
    attempts=small,
)
plans = st.builds(
    Plan, id=ids, goal=text, steps=st.lists(steps, max_size=4), context=json_dicts, created_at=datetimes, version=small
)
observations = st.builds(
    Observation, timestamp=datetimes, content=json_values, source=text, step_id=st.none() | ids, metadata=json_dicts
)
evaluations = st.builds(
    Evaluation,
    score=st.floats(0, 1),
    passed=st.booleans(),
    feedback=text,
    metrics=st.dictionaries(text, st.floats(0, 1), max_size=2),
    timestamp=datetimes,
    step_id=st.none() | ids,
)
failures = st.builds(
    Failure,
    type=st.sampled_from(FailureType),
    message=text,
    step_id=st.none() | ids,
    recoverable=st.booleans(),
    context=json_dicts,
    timestamp=datetimes,
    failure_id=ids,
    status=st.sampled_from(FailureStatus),
    recovery_attempts=small,
    max_recovery_attempts=small,
    recovery_action_ids=st.lists(ids, max_size=2),
    source_component=text,
    evidence=json_dicts,
)
recoveries = st.builds(
    RecoveryAction,
    strategy=st.sampled_from(RecoveryStrategy),
    params=json_dicts,
    estimated_success=st.floats(0, 1),
    action_id=ids,
    failure_id=st.none() | ids,
    timestamp=datetimes,
    executed=st.booleans(),
    success=opt_bool,
    reason=text,
)
budgets = st.builds(
    Budget,
    max_tokens=st.none() | small,
    max_steps=st.none() | small,
    max_time_seconds=opt_num,
    max_cost=opt_num,
    tokens_used=small,
    steps_used=small,
    time_used=st.floats(0, 1e6),
    cost_used=st.floats(0, 1e6),
)
contexts = st.builds(LoopContext, goal=text, initial_context=json_dicts, budget=budgets, metadata=json_dicts)
requests = st.builds(
    ReviewRequest,
    checkpoint_id=ids,
    trigger=st.sampled_from(CheckpointTrigger),
    state_summary=json_dicts,
    proposed_action=text,
    context=json_dicts,
    timestamp=datetimes,
    cause=text,
)
responses = st.builds(
    ReviewResponse,
    checkpoint_id=ids,
    decision=st.sampled_from(HumanDecision),
    feedback=text,
    modifications=json_dicts,
    reviewer=text,
    timestamp=datetimes,
)


@st.composite
def states(draw: st.DrawFn) -> LoopState:
    plan = draw(st.none() | plans)
    if plan is not None and plan.steps and draw(st.booleans()):
        current = plan.steps[draw(st.integers(0, len(plan.steps) - 1))]
    else:
        current = draw(st.none() | steps)
    return LoopState(
        status=draw(st.sampled_from(LoopStatus)),
        execution_state=draw(st.sampled_from(ExecutionState)),
        current_iteration=draw(small),
        current_plan=plan,
        current_step=current,
        observations=draw(st.lists(observations, max_size=3)),
        evaluations=draw(st.lists(evaluations, max_size=3)),
        failures=draw(st.lists(failures, max_size=3)),
        recoveries=draw(st.lists(recoveries, max_size=3)),
        counters=draw(st.dictionaries(text, small, max_size=3)),
        metadata=draw(json_dicts),
        context=draw(st.none() | contexts),
        trace_id=draw(st.none() | ids),
        stop_reason=draw(st.none() | text),
        started_at=draw(opt_dt),
        updated_at=draw(opt_dt),
        transitions=draw(st.lists(st.tuples(text, text), max_size=3)),
        checkpoint_counter=draw(small),
        reviewed_causes=draw(st.lists(text, max_size=3)),
        pending_review=draw(st.none() | requests),
        decisions=draw(st.lists(responses, max_size=2)),
        consecutive_failures=draw(small),
    )


# --- tests ---------------------------------------------------------------------------


def assert_same_state(restored: LoopState, state: LoopState) -> None:
    """Equal in every field, and current_step is the plan's own step object again when it was one."""
    assert restored == state
    if state.current_plan is not None and any(state.current_step is s for s in state.current_plan.steps):
        index = next(i for i, s in enumerate(state.current_plan.steps) if s is state.current_step)
        assert restored.current_plan is not None
        assert restored.current_step is restored.current_plan.steps[index]
    elif state.current_step is not None and restored.current_plan is not None:
        assert all(restored.current_step is not s for s in restored.current_plan.steps)


@settings(max_examples=150, deadline=None)
@given(states())
def test_any_state_round_trips_through_json(state: LoopState) -> None:
    assert_same_state(roundtrip(state), state)
    document = orjson.loads(encode_state(state))
    assert document["schema_version"] == SCHEMA_VERSION
    assert_same_state(state_from_dict(document["state"]), state)


def test_strategy_covers_every_loopstate_field() -> None:
    """If the lead adds a LoopState field, this fails until serialization handles it."""
    fields = {f.name for f in dataclasses.fields(LoopState)}
    assert fields == set(state_to_dict(LoopState()))


def test_every_record_field_is_stored() -> None:
    """Encoders are written out per class: a field added to a record must be added there too."""
    step = Step(id="s")
    data = state_to_dict(
        LoopState(
            current_plan=Plan(steps=[step]),
            current_step=Step(id="other"),
            observations=[Observation()],
            evaluations=[Evaluation()],
            failures=[Failure()],
            recoveries=[RecoveryAction()],
            context=LoopContext(),
        )
    )
    names = lambda cls: {f.name for f in dataclasses.fields(cls)}  # noqa: E731
    assert set(data["current_plan"]) == names(Plan)
    assert set(data["current_plan"]["steps"][0]) == names(Step) == set(data["current_step"]["step"])
    assert set(data["observations"][0]) == names(Observation)
    assert set(data["evaluations"][0]) == names(Evaluation)
    assert set(data["failures"][0]) == names(Failure)
    assert set(data["recoveries"][0]) == names(RecoveryAction)
    assert set(data["context"]) == names(LoopContext)
    assert set(data["context"]["budget"]) == names(Budget)


class Colour(enum.StrEnum):
    RED = "red"


class Size(enum.IntEnum):
    BIG = 3


class Money(float):
    pass


def test_subclasses_of_json_types_are_stored_as_their_plain_values() -> None:
    metadata = {
        "ordered": OrderedDict(a=1),
        "colour": Colour.RED,
        "size": Size.BIG,
        "money": Money(2.5),
        "proxy": MappingProxyType({"k": [1]}),
    }
    state = LoopState(metadata=metadata)
    for restored in (roundtrip(state), state_from_dict(orjson.loads(encode_state(state))["state"])):
        assert restored.metadata == {"ordered": {"a": 1}, "colour": "red", "size": 3, "money": 2.5, "proxy": {"k": [1]}}
        assert type(restored.metadata["colour"]) is str and type(restored.metadata["proxy"]) is dict


class Stamp(datetime):
    pass


def test_datetimes_orjson_cannot_write_exactly_are_formatted_by_isoformat() -> None:
    odd_offset = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(seconds=7, microseconds=5)))
    state = LoopState(
        started_at=odd_offset,
        updated_at=Stamp(2026, 1, 1, 12, 0, 0, 1),
        observations=[Observation(timestamp=odd_offset), Observation(timestamp=Stamp(2026, 2, 2))],
    )
    stored = orjson.loads(encode_state(state))["state"]
    assert stored["started_at"] == "2026-01-01T11:59:52.999995+00:00"  # 3.11 cannot read +00:00:07.000005
    assert stored["observations"][1]["timestamp"] == "2026-02-02T00:00:00"
    assert state_from_dict(stored) == state


def test_loading_does_not_change_the_document_and_restores_gc() -> None:
    data = state_to_dict(
        LoopState(
            current_plan=Plan(steps=[Step(id="a", status=StepStatus.SKIPPED)]), failures=[Failure(failure_id="f")]
        )
    )
    before = copy.deepcopy(data)
    assert state_from_dict(data) == state_from_dict(data)
    assert data == before
    assert gc.isenabled()
    gc.disable()
    try:
        state_to_dict(LoopState())
        assert not gc.isenabled()  # a GC the caller turned off stays off
    finally:
        gc.enable()


def test_transitions_come_back_as_tuples() -> None:
    restored = roundtrip(LoopState(transitions=[("initialized", "planning")]))
    assert restored.transitions == [("initialized", "planning")]
    assert isinstance(restored.transitions[0], tuple)


def test_enums_by_name_and_datetimes_iso() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 6)
    data = state_to_dict(
        LoopState(status=LoopStatus.TERMINATED, execution_state=ExecutionState.COMPLETED, started_at=when)
    )
    assert data["status"] == "TERMINATED"
    assert data["execution_state"] == "COMPLETED"
    assert data["started_at"] == "2026-01-02T03:04:05.000006"
    assert SCHEMA_VERSION == 1


def test_current_step_outside_the_plan_is_stored_in_full() -> None:
    state = LoopState(current_plan=Plan(steps=[Step(id="a")]), current_step=Step(id="a", description="copy"))
    restored = roundtrip(state)
    assert restored.current_step == state.current_step
    assert restored.current_step is not restored.current_plan.steps[0]


class Foo:
    pass


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            LoopState(current_plan=Plan(steps=[Step(id="step_2", output=Foo())])),
            "step 'step_2' output: object of type Foo is not JSON-serialisable",
        ),
        (LoopState(current_plan=Plan(steps=[Step(id="s", output={"k": [1, Foo()]})])), "step 's' output['k'][1]"),
        (LoopState(observations=[Observation(content=(1, 2))]), "observation 0 content: object of type tuple"),
        (LoopState(metadata={1: "x"}), "state metadata: key 1 of type int"),
        (LoopState(metadata={"x": float("nan")}), "state metadata['x']: nan is not a JSON number"),
        (
            LoopState(metadata={"x": [2**64]}),
            "state metadata['x'][0]: integer 18446744073709551616 does not fit in 64 bits",
        ),
        (LoopState(failures=[Failure(failure_id="f1", evidence={"e": {1, 2}})]), "failure 'f1' evidence['e']"),
        (
            LoopState(context=LoopContext(initial_context={"when": datetime(2026, 1, 1)})),
            "context initial_context['when']",
        ),
    ],
)
def test_non_json_values_are_refused_by_name(state: LoopState, message: str) -> None:
    with pytest.raises(NotJSONSerialisableError) as info:
        state_to_dict(state)
    assert message in str(info.value)
    assert isinstance(info.value, TypeError)


def test_saved_dict_does_not_share_containers_with_the_state() -> None:
    state = LoopState(metadata={"list": [1]})
    data = state_to_dict(state)
    data["metadata"]["list"].append(2)
    assert state.metadata == {"list": [1]}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("failures"), "missing key 'failures'"),
        (lambda d: d.__setitem__("status", "NOPE"), "'NOPE' is not a LoopStatus"),
        (lambda d: d.__setitem__("started_at", "yesterday"), "yesterday"),
        (lambda d: d.__setitem__("current_step", {"plan_index": 0}), "has no plan"),
    ],
)
def test_malformed_documents_raise_corrupt_state(mutate, message: str) -> None:
    data = state_to_dict(LoopState())
    mutate(data)
    with pytest.raises(CorruptStateError, match=message):
        state_from_dict(data)


def test_a_value_that_contains_itself_is_refused_by_name_not_with_a_recursion_error() -> None:
    loop: dict[str, object] = {}
    loop["self"] = [loop]
    state = LoopState(current_plan=Plan(steps=[Step(id="s1", output=loop)]))
    with pytest.raises(NotJSONSerialisableError, match="step 's1' output: nested too deeply, or contains itself"):
        state_to_dict(state)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("current_iteration", "3", "current_iteration must be a whole number >= 0, got '3'"),
        ("consecutive_failures", -1, "consecutive_failures must be a whole number >= 0"),
        ("metadata", [1], "metadata must be an object"),
        ("trace_id", 5, "trace_id must be a string or null"),
    ],
)
def test_header_fields_of_the_wrong_type_are_refused_on_load(key: str, value: object, message: str) -> None:
    document = state_to_dict(LoopState())
    document[key] = value
    with pytest.raises(CorruptStateError, match=message):
        state_from_dict(document)


def test_a_plan_step_of_the_wrong_shape_is_refused_on_load() -> None:
    document = state_to_dict(LoopState(current_plan=Plan(steps=[Step(id="a")])))
    document["current_plan"]["steps"][0]["id"] = 7
    with pytest.raises(CorruptStateError, match="step ids are non-empty strings"):
        state_from_dict(document)
