"""Fixtures: a fake GitHub REST server, a client and channel pointed at it, a review post."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest

from adapters.channel import PostOutcome, ReviewPost
from adapters.github.channel import GitHubChannel
from adapters.github.client import GitHubClient, make_github
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest
from tests.fakes.github_api import FakeGitHub

REPO = "octo/ops"


def make_post(review_id: str = "triage-17", **overrides: object) -> ReviewPost:
    request = ReviewRequest(
        checkpoint_id="checkpoint_0001",
        trigger=CheckpointTrigger.ON_EXTERNAL_REQUEST,
        state_summary={"iteration": 2, "status": "PAUSED", "failures": 0},
        proposed_action="Apply 3 labels",
        timestamp=datetime(2026, 1, 2, 9, 0, 0),
    )
    fields: dict[str, object] = {"review_id": review_id, "loop": "triage", "run_id": "triage-run-4",
                                 "request": request, "reviewers": {"github": ("alice", "bob")}}
    fields.update(overrides)
    return ReviewPost(**fields)  # type: ignore[arg-type]


def decided(decision: str = "approve", by: str = "github:alice", reason: str = "", *, timed_out: bool = False,
            status: str = "decided", review_id: str = "triage-17") -> ReviewPost:
    """A review no longer open, its outcome given as data (what the desk builds from the stored review)."""
    outcome = PostOutcome(decision, () if timed_out else (by,), reason, timed_out)
    return make_post(review_id, status=status, outcome=outcome)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.add_issue(REPO, 42, title="Ops reviews")
        yield server


@pytest.fixture
def client(fake: FakeGitHub) -> GitHubClient:
    return GitHubClient(make_github(fake.base_url, token="ghp_test"))


@pytest.fixture
def channel(client: GitHubClient, fake: FakeGitHub) -> GitHubChannel:
    return GitHubChannel(client, bot_login=fake.bot_login)
