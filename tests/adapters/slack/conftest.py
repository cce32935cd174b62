"""Shared fixtures: a running fake Slack Web API, review posts, and a clean Slack environment."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from adapters.channel import ReviewPost
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest
from tests.fakes.slack_api import FakeSlackApi


@pytest.fixture(autouse=True)
def _no_slack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bolt reads these from the environment; a developer's shell must not change what tests see."""
    for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def slack() -> Iterator[FakeSlackApi]:
    with FakeSlackApi(usergroups={"S0OPS": ["U0AAA", "U0BBB"]}) as fake:
        yield fake


def make_request(**overrides: Any) -> ReviewRequest:
    fields: dict[str, Any] = {
        "checkpoint_id": "checkpoint_0001",
        "trigger": CheckpointTrigger.ON_FAILURE,
        "state_summary": {
            "iteration": 2,
            "status": "RUNNING",
            "failures": 1,
            "plan_progress": "2/4 steps done",
            "current_step": "apply: Apply labels",
            "unrecovered_failures": [
                {"id": "f1", "type": "TOOL_ERROR", "status": "OPEN", "step": "apply", "message": "HTTP 502 <html>"},
            ],
        },
        "proposed_action": "Continue with step apply: Apply labels",
        "context": {"goal": "label issues", "repository": "octo/ops"},
        "timestamp": datetime(2026, 11, 29, 8, 43, 49),
    }
    fields.update(overrides)
    return ReviewRequest(**fields)


def make_post(**overrides: Any) -> ReviewPost:
    fields: dict[str, Any] = {
        "review_id": "triage-17",
        "loop": "triage",
        "run_id": "triage-run-3",
        "request": make_request(),
        "reviewers": {"slack": ("U0AAA", "U0BBB")},
        "approvals_required": 2,
    }
    fields.update(overrides)
    return ReviewPost(**fields)
