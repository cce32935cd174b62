"""Permissions and team membership through the fake server, cached for a while."""

from __future__ import annotations

import pytest

from adapters.channel import ChannelError
from adapters.github.client import GitHubClient
from adapters.github.directory import Directory, permission_at_least
from adapters.github.identity import Me
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def directory(client: GitHubClient, clock: Clock) -> Directory:
    return Directory(client, ttl=60, clock=clock)


def test_permission_role_names(directory: Directory, fake: FakeGitHub) -> None:
    for login, role in [("ann", "admin"), ("mo", "maintain"), ("wes", "write"), ("tri", "triage"), ("rea", "read")]:
        fake.permissions[(REPO, login)] = role
        assert directory.permission(REPO, login) == role
    assert directory.permission(REPO, "stranger") == "none"


def test_permissions_are_cached_for_the_ttl(directory: Directory, fake: FakeGitHub, clock: Clock) -> None:
    fake.permissions[(REPO, "wes")] = "write"
    assert directory.permission(REPO, "wes") == "write"
    fake.permissions[(REPO, "wes")] = "read"
    clock.now = 59
    assert directory.permission(REPO, "Wes") == "write"
    assert len(fake.calls_to("GET", r"/permission$")) == 1
    clock.now = 61
    assert directory.permission(REPO, "wes") == "read"


def test_team_membership(directory: Directory, fake: FakeGitHub, clock: Clock) -> None:
    fake.teams[("octo", "ops-team", "alice")] = "active"
    fake.teams[("octo", "ops-team", "bob")] = "pending"
    assert directory.in_team("octo/ops-team", "alice")
    assert not directory.in_team("octo/ops-team", "bob")
    assert not directory.in_team("octo/ops-team", "carol")
    fake.teams[("octo", "ops-team", "carol")] = "active"
    assert not directory.in_team("octo/ops-team", "carol")  # cached
    clock.now = 120
    assert directory.in_team("octo/ops-team", "carol")
    with pytest.raises(ValueError):
        directory.in_team("ops-team", "alice")


def test_failures_raise_and_are_not_cached(directory: Directory, fake: FakeGitHub) -> None:
    fake.permissions[(REPO, "wes")] = "write"
    fake.fail("GET", r"/permission$", 500)
    with pytest.raises(ChannelError):
        directory.permission(REPO, "wes")
    assert directory.permission(REPO, "wes") == "write"


def test_permission_order() -> None:
    assert permission_at_least("maintain", "write")
    assert permission_at_least("admin", "admin")
    assert not permission_at_least("triage", "write")
    assert not permission_at_least("weird", "read")
    with pytest.raises(ValueError):
        permission_at_least("write", "owner")


def test_me_names_the_tokens_user(client: GitHubClient, fake: FakeGitHub) -> None:
    assert client.me() == Me(fake.bot_login)
