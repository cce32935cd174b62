"""The neutral channel types."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from adapters.channel import MessageRef, ReviewPost
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest


def test_message_ref_round_trips_through_json() -> None:
    ref = MessageRef("slack", {"channel": "C0123", "ts": "1700000000.000100"})
    assert MessageRef.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref


def test_message_ref_to_dict_is_a_copy() -> None:
    ref = MessageRef("local", {"review_id": "demo-1"})
    ref.to_dict()["data"]["review_id"] = "changed"
    assert ref.data == {"review_id": "demo-1"}


@pytest.mark.parametrize(
    "raw", [{}, {"channel": "local"}, {"channel": 1, "data": {}}, {"channel": "x", "data": []}, None]
)
def test_message_ref_from_dict_refuses_malformed(raw: object) -> None:
    with pytest.raises(ValueError, match="message reference"):
        MessageRef.from_dict(raw)  # type: ignore[arg-type]


def test_review_post_defaults() -> None:
    request = ReviewRequest(checkpoint_id="checkpoint_0001", trigger=CheckpointTrigger.ON_PLAN_COMPLETE,
                            timestamp=datetime(2026, 1, 1))
    post = ReviewPost("demo-1", "demo", "demo-run-1", request)
    assert post.reviewers_hint == ""
    with pytest.raises(AttributeError):
        post.review_id = "other"  # type: ignore[misc]
