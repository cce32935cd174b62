"""LoopStatePersistence, including one test per defect of the reference implementation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.loop_engine.test_serialization import assert_same_state, states

import loop_engine.persistence as persistence_module
from loop_engine.errors import ConfigurationError, CorruptStateError, SchemaVersionError
from loop_engine.ids import new_trace_id, validate_trace_id
from loop_engine.jsonvalue import NotJSONSerialisableError
from loop_engine.persistence import (
    LoopStatePersistence,
    PersistenceConfig,
    StateNotFoundError,
)
from loop_engine.review import CheckpointTrigger, HumanDecision, ReviewRequest, ReviewResponse
from loop_engine.types import (
    Budget,
    ExecutionState,
    Failure,
    FailureStatus,
    LoopContext,
    LoopState,
    LoopStatus,
    Observation,
    Plan,
    RecoveryAction,
    Step,
    StepStatus,
)


def rich_state() -> LoopState:
    plan = Plan(
        id="p1",
        goal="ship it",
        steps=[
            Step(id="a", status=StepStatus.VERIFIED_COMPLETED, output={"files": ["x.py"]}, attempts=1),
            Step(id="b", dependencies=["a"], status=StepStatus.RETRY_PENDING, output="half | done"),
        ],
    )
    failure = Failure(
        failure_id="f1",
        step_id="b",
        message="tool broke",
        recovery_attempts=2,
        status=FailureStatus.RECOVERY_IN_PROGRESS,
    )
    return LoopState(
        status=LoopStatus.PAUSED,
        execution_state=ExecutionState.WAITING_FOR_HUMAN,
        current_iteration=3,
        current_plan=plan,
        current_step=plan.steps[1],
        observations=[Observation(content={"n": 1}, step_id="a")],
        failures=[failure],
        recoveries=[RecoveryAction(failure_id="f1")],
        counters={"actor": 3},
        context=LoopContext(
            goal="ship it",
            initial_context={"repo": "o/r"},
            budget=Budget(max_cost=5.0, cost_used=1.5, max_steps=10, steps_used=3),
        ),
        trace_id="run-1",
        checkpoint_counter=2,
        reviewed_causes=["failure:f1"],
        pending_review=ReviewRequest(
            checkpoint_id="checkpoint_0002", trigger=CheckpointTrigger.ON_FAILURE, cause="failure:f1"
        ),
        decisions=[ReviewResponse(checkpoint_id="checkpoint_0001", decision=HumanDecision.RETRY, feedback="try again")],
        transitions=[("initialized", "planning")],
    )


def store(tmp_path: Path, **kwargs) -> LoopStatePersistence:
    kwargs.setdefault("format", "json")
    return LoopStatePersistence(PersistenceConfig(state_dir=tmp_path / "state", **kwargs))


# --- JSON is complete ----------------------------------------------------------------


def test_json_save_load_restores_every_field(tmp_path: Path) -> None:
    p = store(tmp_path)
    state = rich_state()
    path = p.save(state, trace_id="demo-run-1")
    assert path.name == "loop_state_demo-run-1.json"
    loaded = p.load("demo-run-1")
    assert loaded == state
    assert loaded.current_step is loaded.current_plan.steps[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=states())
def test_any_state_round_trips_through_the_store(tmp_path: Path, state: LoopState) -> None:
    p = store(tmp_path, max_history=0, durable=False)
    p.save(state, trace_id="h")
    assert_same_state(p.load("h"), state)


def test_document_carries_schema_version_and_is_utf8(tmp_path: Path) -> None:
    p = store(tmp_path)
    state = LoopState(metadata={"note": "naïve – ünïcode ✓"})
    path = p.save(state, trace_id="t")
    document = json.loads(path.read_bytes().decode("utf-8"))
    assert document["schema_version"] == 1
    assert document["state"]["metadata"]["note"] == "naïve – ünïcode ✓"
    assert p.load("t").metadata == state.metadata


def test_json_format_writes_json_not_markdown(tmp_path: Path) -> None:
    """Reference defect: format="json" still wrote loop_state_<id>.md."""
    p = store(tmp_path)
    p.save(LoopState(), trace_id="t")
    assert sorted(x.name for x in (tmp_path / "state").iterdir() if x.is_file()) == ["loop_state_t.json"]


def test_newer_schema_is_refused_naming_file_and_versions(tmp_path: Path) -> None:
    p = store(tmp_path)
    path = p.save(LoopState(), trace_id="t")
    document = json.loads(path.read_text("utf-8"))
    document["schema_version"] = 7
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(SchemaVersionError) as info:
        p.load("t")
    assert str(path) in str(info.value) and "7" in str(info.value) and "schema_version 1" in str(info.value)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"schema_version": 1, "sta',
        b"\xff\xfe garbage",
        b"[1, 2]",
        b'{"schema_version": 1}',
        b'{"schema_version": "1", "state": {}}',
        b'{"schema_version": 1, "state": {"status": "PENDING"}}',
    ],
)
def test_truncated_or_corrupt_file_names_the_file(tmp_path: Path, content: bytes) -> None:
    """Reference defect: a bad file loaded as a blank state."""
    p = store(tmp_path)
    path = p.save(rich_state(), trace_id="t")
    path.write_bytes(content)
    with pytest.raises(CorruptStateError) as info:
        p.load("t")
    assert str(path) in str(info.value)


def test_truncation_at_every_byte_offset_names_the_file(tmp_path: Path) -> None:
    """A crash mid-write by something that bypassed the atomic write: never a blank or partial state."""
    p = store(tmp_path, max_history=0, durable=False)
    path = p.save(rich_state(), trace_id="t")
    whole = path.read_bytes()
    for cut in range(len(whole)):
        path.write_bytes(whole[:cut])
        with pytest.raises(CorruptStateError) as info:
            p.load("t")
        assert str(path) in str(info.value), cut


def test_truncated_real_document_is_corrupt(tmp_path: Path) -> None:
    p = store(tmp_path)
    path = p.save(rich_state(), trace_id="t")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CorruptStateError, match="truncated"):
        p.load("t")


def test_missing_file_names_trace_and_directory(tmp_path: Path) -> None:
    p = store(tmp_path)
    with pytest.raises(StateNotFoundError) as info:
        p.load("nope")
    assert isinstance(info.value, FileNotFoundError)
    assert "'nope'" in str(info.value) and str(tmp_path / "state") in str(info.value)


def test_missing_json_mentions_existing_markdown(tmp_path: Path) -> None:
    store(tmp_path, format="markdown").save(LoopState(), trace_id="t")
    with pytest.raises(StateNotFoundError, match="markdown snapshot exists"):
        store(tmp_path).load("t")


def test_non_json_step_output_fails_at_save_naming_the_step_and_writes_nothing(tmp_path: Path) -> None:
    p = store(tmp_path)
    state = LoopState(current_plan=Plan(steps=[Step(id="step_2", output=object())]))
    with pytest.raises(NotJSONSerialisableError, match="step 'step_2' output: object of type object"):
        p.save(state, trace_id="t")
    assert not (tmp_path / "state" / "loop_state_t.json").exists()


def test_lone_surrogate_is_refused_at_save_naming_the_place(tmp_path: Path) -> None:
    p = store(tmp_path)
    state = LoopState(current_plan=Plan(steps=[Step(id="s", description="half \ud800 a pair")]))
    with pytest.raises(NotJSONSerialisableError, match=r"state\['current_plan'\]\['steps'\]\[0\]\['description'\]"):
        p.save(state, trace_id="t")
    assert not (tmp_path / "state" / "loop_state_t.json").exists()
    audit = store(tmp_path, format="markdown").save(state, trace_id="t")  # an audit shows it escaped
    assert "half \\ud800 a pair" in audit.read_text("utf-8")


# --- atomic, durable, safe names ---------------------------------------------------------------


def test_writes_go_through_atomic_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, bool]] = []
    real = persistence_module.atomic_write_bytes

    def recording(path, data, *, durable=True):
        calls.append((Path(path).name, durable))
        return real(path, data, durable=durable)

    monkeypatch.setattr(persistence_module, "atomic_write_bytes", recording)
    store(tmp_path, max_history=0).save(LoopState(), trace_id="t")
    store(tmp_path, max_history=0, durable=False).save(LoopState(), trace_id="u")
    assert calls == [("loop_state_t.json", True), ("loop_state_u.json", False)]


def test_crash_during_write_keeps_the_old_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = store(tmp_path, max_history=0)
    p.save(LoopState(current_iteration=1), trace_id="t")

    def failing_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        p.save(LoopState(current_iteration=2), trace_id="t")
    monkeypatch.undo()
    assert p.load("t").current_iteration == 1
    assert [x.name for x in (tmp_path / "state").iterdir()] == ["loop_state_t.json"]  # no temp files left


@pytest.mark.parametrize("as_str", [True, False])
def test_state_dir_may_be_str_or_path(tmp_path: Path, as_str: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reference defect: a str state_dir crashed."""
    monkeypatch.chdir(tmp_path)
    p = LoopStatePersistence(PersistenceConfig(state_dir="my_state" if as_str else Path("my_state"), format="json"))
    assert p.save(LoopState(), trace_id="x") == Path("my_state") / "loop_state_x.json"
    assert p.load("x") == LoopState()


@pytest.mark.parametrize(
    "bad", ["", "a/b", "..", "../x", "a\\b", "x..y", ".hidden", "a" * 129, "tab\there", "nul\x00", 5]
)
def test_unsafe_trace_ids_are_refused(tmp_path: Path, bad) -> None:
    """Reference defect: trace ids were not sanitised (path traversal)."""
    p = store(tmp_path)
    with pytest.raises(ValueError):
        p.save(LoopState(), trace_id=bad)
    with pytest.raises(ValueError):
        p.load(bad)
    assert not (tmp_path / "x").exists()


def test_safe_trace_ids_are_accepted() -> None:
    for good in ["demo-run-1", "a.b", "triage_17", "a" * 128, "run 1"]:
        assert validate_trace_id(good) == good


def test_the_length_limit_counts_bytes_because_file_names_do(tmp_path: Path) -> None:
    assert validate_trace_id("é" * 64) == "é" * 64  # 128 bytes
    with pytest.raises(ValueError, match=r"65 characters \(130 bytes in UTF-8\); at most 128 bytes"):
        validate_trace_id("é" * 65)
    with pytest.raises(ValueError, match="bytes"):
        store(tmp_path).save(LoopState(), trace_id="\U0001F600" * 33)  # 132 bytes


def test_default_trace_id_is_unique_and_stored_on_the_state(tmp_path: Path) -> None:
    """Reference defect: default id had one-second resolution and collided."""
    p = store(tmp_path, max_history=0)
    states = [LoopState() for _ in range(50)]
    paths = {p.save(s) for s in states}
    assert len(paths) == 50
    assert all(p.path_for(s.trace_id) in paths for s in states)
    assert len({new_trace_id() for _ in range(1000)}) == 1000


def test_save_uses_the_states_own_trace_id(tmp_path: Path) -> None:
    p = store(tmp_path)
    assert p.save(LoopState(trace_id="mine")).name == "loop_state_mine.json"


# --- history -----------------------------------------------------------------------------


def test_max_history_keeps_last_n_of_that_trace_only(tmp_path: Path) -> None:
    """Reference defect: cleanup deleted other runs' files by mtime."""
    p = store(tmp_path, max_history=3)
    for i in range(3):
        p.save(LoopState(current_iteration=i), trace_id="other")
    for i in range(10):
        p.save(LoopState(current_iteration=i), trace_id="mine")
    mine = p.list_history("mine")
    assert [x.name for x in mine] == ["00000008.json", "00000009.json", "00000010.json"]
    assert [p.load_path(x).current_iteration for x in mine] == [7, 8, 9]
    assert len(p.list_history("other")) == 3
    assert p.load("other").current_iteration == 2


def test_history_continues_in_a_new_process_and_prunes_leftovers(tmp_path: Path) -> None:
    first = store(tmp_path, max_history=5)
    for i in range(5):
        first.save(LoopState(current_iteration=i), trace_id="t")
    second = store(tmp_path, max_history=2)  # a later process with a smaller limit
    second.save(LoopState(current_iteration=99), trace_id="t")
    assert [x.name for x in second.list_history("t")] == ["00000005.json", "00000006.json"]


def test_save_never_lists_the_state_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reference defect: every save globbed and stat'ed every state file, so its cost grew with the runs stored.

    A fresh object (a new process) saving a trace that has history from an
    earlier process may list that trace's own history directory, once; it
    never lists the state directory or anything else, however many runs it holds.
    """
    for i in range(30):
        store(tmp_path, max_history=2, durable=False).save(LoopState(), trace_id=f"other-{i}")
    earlier = store(tmp_path, max_history=2)
    for i in range(3):
        earlier.save(LoopState(current_iteration=i), trace_id="t")

    listed: list[Path] = []
    real_scandir, real_listdir = os.scandir, os.listdir

    def scandir(path=".", *args, **kwargs):  # Path.glob, glob.glob and os.walk come here
        listed.append(Path(path))
        return real_scandir(path, *args, **kwargs)

    def listdir(path=".", *args, **kwargs):  # Path.iterdir comes here
        listed.append(Path(path))
        return real_listdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    p = store(tmp_path, max_history=2)
    for i in range(5):
        p.save(LoopState(current_iteration=10 + i), trace_id="t")
    monkeypatch.undo()
    assert listed == [tmp_path / "state" / "history" / "t"]
    assert [p.load_path(x).current_iteration for x in p.list_history("t")] == [13, 14]
    assert all(len(p.list_history(f"other-{i}")) == 1 for i in range(30))


def test_history_without_hard_links_falls_back_to_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src, dst):
        raise OSError("links not supported here")

    monkeypatch.setattr(os, "link", no_links)
    p = store(tmp_path, max_history=2)
    for i in range(3):
        p.save(LoopState(current_iteration=i), trace_id="t")
    assert [p.load_path(x).current_iteration for x in p.list_history("t")] == [1, 2]


def test_max_history_zero_keeps_no_history(tmp_path: Path) -> None:
    p = store(tmp_path, max_history=0)
    p.save(LoopState(), trace_id="t")
    assert not (tmp_path / "state" / "history").exists()


# --- listing, latest, delete -----------------------------------------------------------------


def test_list_load_latest_and_delete(tmp_path: Path) -> None:
    p = store(tmp_path)
    assert p.list_saved_states() == [] and p.load_latest() is None
    p.save(LoopState(current_iteration=1), trace_id="old")
    path = p.save(LoopState(current_iteration=2), trace_id="new")
    later = path.stat().st_mtime_ns + 10**12
    os.utime(path, ns=(later, later))  # make "new" unambiguously newest
    assert [e["trace_id"] for e in p.list_saved_states()] == ["new", "old"]
    assert p.load_latest().current_iteration == 2
    assert p.delete("new") is True
    assert p.delete("new") is False
    assert p.list_history("new") == []
    assert [e["trace_id"] for e in p.list_saved_states()] == ["old"]


@pytest.mark.parametrize(
    "kwargs", [{"format": "yaml"}, {"save_interval": 0}, {"max_history": -1}, {"save_interval": True}]
)
def test_bad_config_is_refused(kwargs) -> None:
    with pytest.raises(ConfigurationError):
        PersistenceConfig(**kwargs)


def test_is_due_follows_auto_save_and_interval() -> None:
    assert [PersistenceConfig(save_interval=2).is_due(i) for i in range(4)] == [True, False, True, False]
    assert not PersistenceConfig(auto_save=False).is_due(2)


# --- markdown format -------------------------------------------------------------------------


def test_markdown_is_the_default_and_restores_header_fields_only(tmp_path: Path) -> None:
    p = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path))
    state = rich_state()
    state.stop_reason = "terminator fired"
    path = p.save(state, trace_id="md")
    assert path.name == "loop_state_md.md"
    loaded = p.load("md")
    for name in (
        "trace_id",
        "status",
        "execution_state",
        "current_iteration",
        "counters",
        "stop_reason",
        "checkpoint_counter",
    ):
        assert getattr(loaded, name) == getattr(state, name)
    assert loaded.current_plan is None and loaded.failures == [] and loaded.context is None


def test_markdown_without_header_is_corrupt(tmp_path: Path) -> None:
    p = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path))
    path = p.save(LoopState(), trace_id="md")
    path.write_text("# just some notes\n", "utf-8")
    with pytest.raises(CorruptStateError, match=str(path)):
        p.load("md")
