"""daily-triage end to end: ``loopbot serve`` with only a ``github:`` block, and no GITHUB_TOKEN anywhere.

The bot's connection - a token, a GitHub App installation, a GitHub
Enterprise Server ``base_url`` under ``/api/v3`` - is what triage reads and
labels with; the review goes to octo/ops#42, answered there (or with
`loopbot decide`), and a second run over the unchanged repository opens no
review. The fake GitHub on 127.0.0.1 is ``tests.fakes.github_triage``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.github_triage import TriageGitHub, days_ago

from .conftest import Bot, Workspace, wait_for
from .github_support import ISSUE, REPOSITORY, SECRET, TARGET, comment_delivery, deliver, replies_to, votes_of

pytestmark = pytest.mark.e2e

LOOP = "daily-triage"
NOW = datetime.now(UTC)


def _arrange(fake: TriageGitHub) -> TriageGitHub:
    fake.bulk(REPOSITORY, [
        {"number": 1, "title": "Crash on start", "updated_at": days_ago(1, NOW)},
        {"number": 4, "title": "Dark mode", "updated_at": days_ago(1, NOW)},
        {"number": ISSUE, "title": "Triage reviews", "updated_at": days_ago(1, NOW)},
    ])
    fake.permissions[(REPOSITORY, "alice")] = "write"
    return fake


@pytest.fixture
def gh() -> Iterator[TriageGitHub]:
    with TriageGitHub() as fake:
        yield _arrange(fake)


@pytest.fixture
def ghes() -> Iterator[TriageGitHub]:
    with TriageGitHub(prefix="/api/v3") as fake:
        yield _arrange(fake)


def _serve(ws: Workspace, gh: TriageGitHub, block: dict[str, Any]) -> tuple[Bot, dict[str, Any]]:
    ws.env.pop("GITHUB_TOKEN", None)  # only the github: block says how to reach GitHub
    loop = {"name": LOOP, "pattern": "daily-triage", "run_on_start": True, "checkpoint": {"preset": "manual_only"},
            "options": {"repository": REPOSITORY, "writes_per_minute": None, "writes_per_hour": None},
            "review": {"post_to": [TARGET], "reviewers": {"github_users": ["alice"], "local": ["alice"]}}}
    ws.write_config([loop], github={"webhook_secret": SECRET, **block})
    checked = ws.cli("check")
    assert checked.returncode == 0, checked.stderr
    assert f"loop {LOOP}: daily-triage reads {REPOSITORY} at {block['base_url']}" in checked.stdout, checked.stdout
    bot = ws.serve()
    review = ws.wait_open_review(LOOP)
    marker = f"<!-- loopbot:review={review['id']} -->"
    wait_for(lambda: any(c["body"].startswith(marker) for c in gh.comments_on(REPOSITORY, ISSUE)) or None,
             timeout=15, what="the review comment on #42")
    return bot, review


def _comment(bot: Bot, gh: TriageGitHub, body: str, login: str = "alice") -> None:
    comment = gh.add_comment(REPOSITORY, ISSUE, body, login)
    answer = deliver(bot, "issue_comment", comment_delivery(comment))
    assert answer.status_code in (200, 202), answer.text


def _review_comments(gh: TriageGitHub) -> int:
    return sum(1 for c in gh.comments_on(REPOSITORY, ISSUE) if c["body"].startswith("<!-- loopbot:review="))


def _runs(ws: Workspace, status: str) -> list[dict[str, Any]]:
    return [r for r in ws.status(everything=True)["runs"] if r["loop"] == LOOP and r["status"] == status]


def _second_run_opens_no_review(ws: Workspace, bot: Bot, gh: TriageGitHub) -> None:
    # the first run's messages (its review's update and labels) land first: counted from there
    wait_for(lambda: bot.healthz().json()["outbox_pending"] == 0, timeout=15, what="the first run's messages sent")
    writes = len(gh.calls_to("POST", r"/issues/\d+/labels$"))
    posted = _review_comments(gh)
    handed = ws.cli("run", LOOP)
    assert handed.returncode == 0, handed.stderr
    wait_for(lambda: len(_runs(ws, "completed")) == 2 or None, timeout=20, what="the second run to complete")
    reviews = [r for r in ws.status(everything=True)["reviews"] if r["loop"] == LOOP]
    assert len(reviews) == 1, reviews
    assert len(gh.calls_to("POST", r"/issues/\d+/labels$")) == writes  # nothing labelled, not even #42
    assert "P2" not in gh.labels_of(REPOSITORY, ISSUE)
    assert _review_comments(gh) == posted


def test_a_token_block_and_modify_on_github_then_a_quiet_second_run(ws: Workspace, gh: TriageGitHub) -> None:
    bot, review = _serve(ws, gh, {"token": "ghp_block", "base_url": gh.base_url})
    reads = gh.calls_to("GET", rf"/repos/{REPOSITORY}/issues$")
    assert reads and {c.headers["authorization"] for c in reads} == {"token ghp_block"}

    _comment(bot, gh, "/modify skip=#1 label.#4=P9")
    said = wait_for(lambda: replies_to(gh, "alice") or None, timeout=10, what="the answer to the refused modify")
    assert "P9 is not a label daily-triage adds; the labels it may add: P0, P1, P2" in said[0]["body"], said
    assert votes_of(ws, review["id"]) == [] and ws.review(review["id"])["status"] == "open"

    _comment(bot, gh, "/modify skip=#1 label.#4=P0")
    ws.wait_run(review["run"], "completed", timeout=20)
    assert gh.labels_of(REPOSITORY, 1) == [] and gh.labels_of(REPOSITORY, 4) == ["P0"]
    _second_run_opens_no_review(ws, bot, gh)
    assert bot.terminate() == 0


def test_an_app_installation_block(ws: Workspace, gh: TriageGitHub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    bot, review = _serve(ws, gh, {"app_id": 4242, "private_key": pem, "installation_id": 99, "base_url": gh.base_url})
    reads = gh.calls_to("GET", rf"/repos/{REPOSITORY}/issues$")
    tokens = {f"token {t}" for t in gh.installation_tokens}
    assert reads and {c.headers["authorization"] for c in reads} <= tokens
    _comment(bot, gh, "/approve")
    ws.wait_run(review["run"], "completed", timeout=20)
    assert gh.labels_of(REPOSITORY, 1) == ["P1"]
    assert bot.terminate() == 0


def test_an_enterprise_base_url_and_modify_with_loopbot_decide(ws: Workspace, ghes: TriageGitHub) -> None:
    bot, review = _serve(ws, ghes, {"token": "ghp_block", "base_url": ghes.base_url})
    assert ghes.calls and all(call.status != 404 for call in ghes.calls)  # everything under /api/v3

    refused = ws.cli("decide", review["id"], "modify", "--set", "label.#4=wontfix")
    assert refused.returncode != 0
    assert "wontfix is not a label daily-triage adds; the labels it may add: P0, P1, P2" in refused.stderr
    done = ws.cli("decide", review["id"], "modify", "--set", "skip=#1", "--set", "label.#4=P0")
    assert done.returncode == 0, done.stderr
    ws.wait_run(review["run"], "completed", timeout=20)
    assert ghes.labels_of(REPOSITORY, 1) == [] and ghes.labels_of(REPOSITORY, 4) == ["P0"]
    _second_run_opens_no_review(ws, bot, ghes)
    assert bot.terminate() == 0
