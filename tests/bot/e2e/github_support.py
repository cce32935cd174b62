"""Helpers for end-to-end tests of the GitHub channel: a fake GitHub, signed webhook deliveries, config blocks.

Deliveries are the real payloads of ``../shared/fixtures/github`` with the
repository, issue, comment and sender changed, signed as GitHub signs them
(``X-Hub-Signature-256``), and sent to a running ``loopbot serve``.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from urllib.parse import urlencode
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.github.webhook import sign
from bot.review_records import Review
from bot.store import SqliteStore
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi, signed_headers

from .conftest import REPO as REPO_ROOT
from .conftest import Bot, Workspace, demo_loop, wait_for
from .slack_support import SlackDesk

__all__ = [
    "FIXTURES", "REPOSITORY", "ISSUE", "SECRET", "TARGET", "github_block", "github_loop", "comment_delivery",
    "label_delivery",
    "deliver", "review_comment", "wait_review_comment", "replies_to", "stored_review", "votes_of", "gh",
    "slack_block", "slash", "SLACK_CHANNEL", "slack", "serve_github", "github_app_key",
]

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "github"  # a copy of ../shared/fixtures/github
REPOSITORY = "octo/ops"
ISSUE = 42
SECRET = "whsec-e2e-one"
TARGET = {"github": {"repository": REPOSITORY, "issue": ISSUE}}


@cache
def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _where(payload: dict[str, Any], repository: str, issue: int) -> dict[str, Any]:
    payload["repository"]["full_name"] = repository
    payload["repository"]["name"] = repository.split("/", 1)[1]
    payload["repository"]["owner"]["login"] = repository.split("/", 1)[0]
    payload["issue"]["number"] = issue
    payload["issue"].pop("pull_request", None)
    return payload


def comment_delivery(comment: dict[str, Any], *, repository: str = REPOSITORY,
                     issue: int = ISSUE) -> dict[str, Any]:
    """An ``issue_comment`` / ``created`` payload for a comment the fake holds (its id, body, author)."""
    payload = _where(copy.deepcopy(_fixture("issue_comment.created")), repository, issue)
    for key in ("id", "body", "created_at", "updated_at", "html_url"):
        payload["comment"][key] = comment[key]
    login = comment["user"]["login"]
    for who in (payload["comment"]["user"], payload["sender"]):
        who["login"] = login
        who["type"] = comment["user"]["type"]
    return payload


def label_delivery(label: str, login: str, *, repository: str = REPOSITORY, issue: int = ISSUE,
                   at: str | None = None) -> dict[str, Any]:
    """An ``issues`` / ``labeled`` payload; the issue's ``updated_at`` is when it was labelled (``at``, else now)."""
    payload = _where(copy.deepcopy(_fixture("issues.labeled")), repository, issue)
    payload["issue"]["updated_at"] = at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    payload["label"]["name"] = label
    payload["sender"]["login"] = login
    payload["sender"]["type"] = "User"
    return payload


def deliver(bot: Bot, event: str, payload: dict[str, Any] | bytes, *, delivery: str | None = None,
            secret: str = SECRET, hook_id: str = "109948940", signature: str | None = None) -> httpx.Response:
    """POST one webhook delivery to the bot, signed with ``secret`` (or the given ``signature``)."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": hook_id,
        "X-Hub-Signature-256": signature if signature is not None else sign(secret, body),
    }
    return httpx.post(f"http://127.0.0.1:{bot.port}/github/webhook", content=body, headers=headers, timeout=10)


SLACK_SECRET = "e2e-github-flow-signing"
SLACK_CHANNEL = "C0REVIEW"


def slack_block(slack: FakeSlackApi) -> dict[str, Any]:
    return {"bot_token": BOT_TOKEN, "signing_secret": SLACK_SECRET, "api_base_url": slack.base_url}


def slash(bot: Bot, slack: FakeSlackApi, text: str, user: str, user_name: str = "someone") -> httpx.Response:
    """``/loopbot <text>`` typed by ``user`` in the review channel, signed as Slack signs it."""
    fields = SlackDesk.slash_fields(text, user, channel=SLACK_CHANNEL)
    body = urlencode({**fields, "user_name": user_name, "response_url": slack.response_url})
    return httpx.post(f"http://127.0.0.1:{bot.port}/slack/events", content=body,
                      headers=signed_headers(SLACK_SECRET, body), timeout=10)


def github_block(fake: FakeGitHub, **extra: Any) -> dict[str, Any]:
    """The config's ``github:`` block for the fake (a webhook secret unless ``webhook_secret=None``)."""
    block: dict[str, Any] = {"token": "ghp_test", "base_url": fake.base_url, "webhook_secret": SECRET}
    block.update(extra)
    return {key: value for key, value in block.items() if value is not None}


def github_loop(*, targets: list[dict[str, Any]] | None = None, **review: Any) -> dict[str, Any]:
    """The demo loop, started at once, posting its review to the fake's issue (``targets`` to change that)."""
    return demo_loop(run_on_start=True, review={"post_to": targets or [TARGET], **review})


def github_app_key() -> tuple[rsa.RSAPrivateKey, str]:
    """A fresh GitHub App private key and its PEM, for ``github_block(..., private_key=pem)``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return key, pem


def serve_github(ws: Workspace, fake: FakeGitHub, loop: dict[str, Any] | None = None,
                 **block: Any) -> tuple[Bot, dict[str, Any], dict[str, Any]]:
    """Serve ``loop`` (the ``github_loop()`` default) with the fake's ``github_block(**block)``.

    Returns the bot, its open review as ``status`` shows it, and the first
    comment on octo/ops#42 that carries the review's marker - the setup most
    GitHub tests start from, so each test reads from its first vote on.
    """
    ws.write_config([loop or github_loop()], github=github_block(fake, **block))
    bot = ws.serve()
    review = ws.wait_open_review()
    return bot, review, wait_review_comment(fake, review["id"])


def review_comment(fake: FakeGitHub, review_id: str) -> dict[str, Any] | None:
    marker = f"<!-- loopbot:review={review_id} -->"
    return next((c for c in fake.comments_on(REPOSITORY, ISSUE) if c["body"].startswith(marker)), None)


def wait_review_comment(fake: FakeGitHub, review_id: str) -> dict[str, Any]:
    return wait_for(lambda: review_comment(fake, review_id), timeout=15,
                    what=f"the review comment of {review_id} on {REPOSITORY}#{ISSUE}")


def replies_to(fake: FakeGitHub, login: str) -> list[dict[str, Any]]:
    """The bot's answers to ``login`` (reply comments to a vote), oldest first."""
    return [c for c in fake.comments_on(REPOSITORY, ISSUE)
            if c["user"]["login"] == fake.bot_login and c["body"].startswith("<!-- loopbot:answer=github:")
            and f"@{login}" in c["body"]]


@pytest.fixture
def gh() -> Iterator[FakeGitHub]:
    """A fake GitHub with the review issue octo/ops#42; alice and bob may write, mallory only read."""
    with FakeGitHub() as fake:
        fake.add_issue(REPOSITORY, ISSUE, title="Ops reviews")
        fake.permissions[(REPOSITORY, "alice")] = "write"
        fake.permissions[(REPOSITORY, "bob")] = "admin"
        fake.permissions[(REPOSITORY, "mallory")] = "read"
        yield fake


def stored_review(ws: Workspace, review_id: str) -> Review:
    """The review as the store holds it, read in-process (no `status` subprocess per poll)."""
    return SqliteStore(Path(ws.state_dir)).get_review(review_id)


def votes_of(ws: Workspace, review_id: str) -> list[tuple[str, str, str]]:
    """(voter, decision, source) of every vote recorded on the review."""
    return [(v.voter, v.decision.name, v.source) for v in stored_review(ws, review_id).votes]


@pytest.fixture
def slack() -> Iterator[FakeSlackApi]:
    with FakeSlackApi() as fake:
        yield fake
