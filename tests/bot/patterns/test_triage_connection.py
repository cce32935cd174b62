"""daily-triage talks to GitHub as the bot's ``github:`` block says (token, App, GHES base_url) unless options say else.

A fake GitHub on 127.0.0.1 (``tests.fakes.github_triage``) answers; no
``GITHUB_TOKEN`` is in the environment the builder is given.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.config import BotConfig
from bot.patterns import BuildContext, GitHubConnection, LoopSpec
from bot.patterns.triage import TriageSpec, build
from bot.loop_catalog import LoopCatalog, build_context
from loop_engine.checkpoint import CheckpointConfig, HumanCheckpoint
from loop_engine.types import LoopStatus
from tests.fakes.github_triage import TriageGitHub, days_ago

REPO = "octo/ops"
NOW = datetime.now(UTC)


def _backlog(gh: TriageGitHub) -> None:
    gh.bulk(REPO, [{"number": 1, "title": "Crash on start", "updated_at": days_ago(1, NOW)},
                   {"number": 2, "title": "Fix it", "pr": True, "updated_at": days_ago(1, NOW)}])


@pytest.fixture
def gh() -> Iterator[TriageGitHub]:
    with TriageGitHub() as fake:
        _backlog(fake)
        yield fake


@pytest.fixture
def ghes() -> Iterator[TriageGitHub]:
    with TriageGitHub(prefix="/api/v3") as fake:
        _backlog(fake)
        yield fake


def _pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _spec(tmp_path: Path, github: GitHubConnection | None, environ: dict[str, str] | None = None,
          **options: Any) -> LoopSpec:
    settings = {"repository": REPO, "state_dir": str(tmp_path / "state"), **options}
    return build(settings, context=BuildContext(github=github), environ=environ or {})


async def _propose(spec: LoopSpec, tmp_path: Path) -> Any:
    engine = spec.engine_factory(checkpoint=HumanCheckpoint(CheckpointConfig(checkpoint_dir=tmp_path / "cp")))
    result = await engine.run(spec.context_factory(), trace_id="daily-triage-run-1")
    assert result.status is LoopStatus.PAUSED, result.reason
    return result


def _authorizations(gh: TriageGitHub) -> set[str]:
    return {call.headers.get("authorization", "") for call in gh.calls_to("GET", rf"/repos/{REPO}/issues$")}


async def test_a_github_block_token_is_used_without_github_token(gh: TriageGitHub, tmp_path: Path) -> None:
    spec = _spec(tmp_path, GitHubConnection(base_url=gh.base_url, token="ghp_block"))
    assert isinstance(spec, TriageSpec) and spec.inactive is None
    await _propose(spec, tmp_path)
    assert _authorizations(gh) == {"token ghp_block"}
    assert spec.check_connection is not None
    assert spec.check_connection() == (f"daily-triage reads {REPO} at {gh.base_url} with the token of "
                                       f"@{gh.bot_login}")


async def test_a_github_app_installation_is_used(gh: TriageGitHub, tmp_path: Path) -> None:
    app = GitHubConnection(base_url=gh.base_url, app_id=4242, private_key=_pem(), installation_id=99)
    spec = _spec(tmp_path, app)
    assert spec.inactive is None  # type: ignore[attr-defined]
    await _propose(spec, tmp_path)
    assert gh.installation_tokens and _authorizations(gh) == {f"token {gh.installation_tokens[0]}"}
    assert gh.calls_to("POST", r"/app/installations/99/access_tokens$")
    assert spec.check_connection is not None
    assert "with the GitHub App installation of @loopbot-app[bot]" in spec.check_connection()


async def test_an_enterprise_base_url_is_used(ghes: TriageGitHub, tmp_path: Path) -> None:
    assert ghes.base_url.endswith("/api/v3")
    spec = _spec(tmp_path, GitHubConnection(base_url=ghes.base_url, token="ghp_block"))
    result = await _propose(spec, tmp_path)
    assert result.plan is not None and any(s.id == "change-1" for s in result.plan.steps)
    assert all(call.status != 404 for call in ghes.calls)  # every request went under /api/v3


async def test_options_override_the_block(gh: TriageGitHub, tmp_path: Path) -> None:
    elsewhere = GitHubConnection(base_url="http://127.0.0.1:9/api/v3", token="ghp_block")
    spec = _spec(tmp_path, elsewhere, {"TRIAGE_TOKEN": "ghp_own"}, token_env="TRIAGE_TOKEN", base_url=gh.base_url)
    await _propose(spec, tmp_path)
    assert _authorizations(gh) == {"token ghp_own"}
    only_url = _spec(tmp_path / "again", GitHubConnection(base_url="http://127.0.0.1:9", token="ghp_block"),
                     base_url=gh.base_url)
    await _propose(only_url, tmp_path / "again")
    assert "token ghp_block" in _authorizations(gh)


def test_inactive_says_what_is_missing() -> None:
    assert build({"repository": REPO}, context=BuildContext(github=GitHubConnection("https://x")),
                 environ={}).inactive == (  # type: ignore[attr-defined]
        "the github: block has neither a token nor app_id + private_key + installation_id; set it to enable it")
    assert build({"repository": REPO, "token_env": "MINE"}, environ={}).inactive == (  # type: ignore[attr-defined]
        "MINE is not set; set it to enable it")


def test_the_catalog_passes_the_bot_github_block_and_review_issues(gh: TriageGitHub) -> None:
    config = BotConfig.model_validate({
        "github": {"token": "ghp_block", "base_url": gh.base_url},
        "loops": [{"name": "triage", "pattern": "daily-triage", "options": {"repository": REPO},
                   "review": {"post_to": [{"github": {"repository": REPO, "issue": 42}},
                                          {"github": {"repository": REPO}}]}}],
    })
    context = build_context(config, config.loops[0])
    assert context.github is not None and context.github.token == "ghp_block"
    assert "ghp_block" not in repr(context)  # no secret in a logged context
    assert context.review_issues == ((REPO, 42), (REPO, None))
    catalog = LoopCatalog(config)
    assert catalog.inactive("triage") is None  # no GITHUB_TOKEN needed
    assert catalog.connection_checks() == [
        (f"loop triage: daily-triage reads {REPO} at {gh.base_url} with the token of @{gh.bot_login}", True)]
    assert catalog.modification_problem("triage", {"context": {"label": {"#1": "P7"}}}) == (
        "label.#1: P7 is not a label daily-triage adds; the labels it may add: P0, P1, P2, stale, needs-reviewer")


def test_a_connection_check_that_fails_says_so(gh: TriageGitHub) -> None:
    gh.fail("GET", rf"/repos/{REPO}/issues$", 404)
    config = BotConfig.model_validate({
        "github": {"token": "ghp_block", "base_url": gh.base_url},
        "loops": [{"name": "triage", "pattern": "daily-triage", "options": {"repository": REPO}}],
    })
    [(line, ok)] = LoopCatalog(config).connection_checks()
    assert not ok and line.startswith(f"loop triage: daily-triage cannot read {REPO} at {gh.base_url}")
