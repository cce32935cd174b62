"""The checkpoint and persistence plugged into an engine: what it asks of them, checked when it is built."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from loop_engine.checkpoint import HumanCheckpoint
from loop_engine.checkpoint_config import CheckpointConfig
from loop_engine.config import LoopConfig
from loop_engine.engine import LoopEngine
from loop_engine.errors import ConfigurationError
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig
from loop_engine.plug_points import (
    CHECKPOINT_ATTRIBUTES,
    CHECKPOINT_METHODS,
    PERSISTENCE_METHODS,
    Checkpoint,
    Persistence,
)
from loop_engine.review import HumanDecision, ReviewResponse
from loop_engine.types import LoopContext, LoopState, LoopStatus

from .loops import make_engine


class OnlyAsks:
    """A checkpoint that can pause a run but not record the answer, nor say whether it is on."""

    decision_handler = None

    def should_pause(self, state: LoopState) -> None:
        return None

    def present_for_review(self, *args: object, **kwargs: object) -> None:
        return None


def test_a_checkpoint_missing_methods_is_refused_when_the_engine_is_built_naming_them() -> None:
    with pytest.raises(ConfigurationError, match=r"checkpoint OnlyAsks lacks config, refresh_record, "
                                                 r"await_decision, record_decision; use a HumanCheckpoint"):
        LoopEngine(LoopConfig(), checkpoint=OnlyAsks())  # type: ignore[arg-type]


def test_a_persistence_without_save_is_refused_when_the_engine_is_built() -> None:
    with pytest.raises(ConfigurationError, match=r"persistence needs a save\(state, trace_id=...\) method"):
        LoopEngine(LoopConfig(), persistence=object())  # type: ignore[arg-type]


@pytest.mark.parametrize(("protocol", "methods", "attributes", "made"), [
    (Checkpoint, CHECKPOINT_METHODS, CHECKPOINT_ATTRIBUTES, HumanCheckpoint),
    (Persistence, PERSISTENCE_METHODS, (), LoopStatePersistence),
])
def test_the_library_s_own_objects_have_every_method_the_protocol_lists(
    protocol: type, methods: tuple[str, ...], attributes: tuple[str, ...], made: type
) -> None:
    public = {name: value for name, value in vars(protocol).items() if name[0] != "_"}
    # the construction check asks for exactly what the protocol declares
    assert {name for name, value in public.items() if inspect.isfunction(value)} == set(methods)
    assert {name for name, value in public.items() if isinstance(value, property)} == set(attributes)
    for name in methods:
        theirs = inspect.signature(getattr(made, name))
        ours = inspect.signature(getattr(protocol, name))
        assert list(theirs.parameters) == list(ours.parameters), name


async def test_a_run_with_the_library_s_checkpoint_and_persistence_pauses_saves_and_resumes(tmp_path: Path) -> None:
    persistence = LoopStatePersistence(PersistenceConfig(state_dir=tmp_path / "state", format="json", durable=False))
    checkpoint = HumanCheckpoint(CheckpointConfig(trigger_on_plan_complete=True, checkpoint_dir=tmp_path / "cp"))
    engine = make_engine(["a"], checkpoint=checkpoint, persistence=persistence)
    paused = await engine.run(LoopContext(goal="g"), trace_id="plugged")
    assert paused.status is LoopStatus.PAUSED
    state = persistence.load("plugged")
    assert state.pending_review is not None
    answer = ReviewResponse(checkpoint_id=state.pending_review.checkpoint_id, decision=HumanDecision.APPROVE)
    done = await make_engine(["a"], checkpoint=checkpoint, persistence=persistence).resume(state, answer)
    assert done.status is LoopStatus.COMPLETED
    assert [d.decision for d in persistence.load("plugged").decisions] == [HumanDecision.APPROVE]
