"""`loopbot check` asks Slack and GitHub whether the configured tokens work, or says what is wrong."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import EXIT_FAILED, EXIT_OK, main
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import FakeSlackApi

from ..runtime_support import demo, write_config


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSlackApi, FakeGitHub]]:
    with FakeSlackApi() as slack, FakeGitHub() as github:
        github.add_issue("octo/ops", 42)
        yield slack, github


def config_for(tmp_path: Path, slack: FakeSlackApi, github: FakeGitHub) -> Path:
    review = {"post_to": [{"slack": {"channel": "C0AAA"}}, {"github": {"repository": "octo/ops", "issue": 42}}]}
    return write_config(
        tmp_path, [demo(review=review)],
        slack={"bot_token": "xoxb-test", "signing_secret": "s3cret-sign", "api_base_url": slack.base_url},
        github={"token": "ghp_test", "base_url": github.base_url},
    )


def test_check_reports_the_bot_user_and_the_repositories(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    slack, github = fakes
    code = main(["check", "--config", str(config_for(tmp_path, slack, github))])
    out = capsys.readouterr()
    assert code == EXIT_OK, out.err
    assert "slack: bot @" in out.out
    assert "github: token of @" in out.out and "can read octo/ops" in out.out
    assert "xoxb-test" not in out.out + out.err and "ghp_test" not in out.out + out.err


def test_check_says_exactly_what_is_wrong(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    slack, github = fakes
    slack.fail("auth.test", error="invalid_auth")
    github.fail("GET", r"^/repos/octo/ops/issues", 404)
    code = main(["check", "--config", str(config_for(tmp_path, slack, github))])
    err = capsys.readouterr().err
    assert code == EXIT_FAILED
    assert "slack: " in err and "invalid_auth" in err
    assert "github: cannot read octo/ops" in err


def test_check_offline_contacts_nobody(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeGitHub], capsys: pytest.CaptureFixture[str]
) -> None:
    slack, github = fakes
    assert main(["check", "--offline", "--config", str(config_for(tmp_path, slack, github))]) == EXIT_OK
    assert slack.calls == [] and github.calls == []
