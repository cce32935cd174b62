"""Real GitHub webhook payloads (tests/fixtures/github) with a field or two changed, signed as GitHub signs."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from adapters.github.webhook import sign

#: A copy of ../shared/fixtures/github kept in the repository, so a clone anywhere runs these tests.
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "github"
SECRET = "It's a Secret to Everybody"


@cache
def _load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def fixture(name: str) -> dict[str, Any]:
    return copy.deepcopy(_load(name))


def comment_payload(body: str, login: str = "alice", *, kind: str = "User", action: str = "created",
                    comment_id: int | None = None) -> dict[str, Any]:
    payload = fixture(f"issue_comment.{action}")
    payload["comment"]["body"] = body
    payload["comment"]["user"]["login"] = login
    payload["comment"]["user"]["type"] = kind
    payload["sender"]["login"] = login
    payload["sender"]["type"] = kind
    if comment_id is not None:
        payload["comment"]["id"] = comment_id
    return payload


def label_payload(label: str, login: str = "alice", *, action: str = "labeled", kind: str = "User") -> dict[str, Any]:
    payload = fixture(f"issues.{action}")
    payload["label"]["name"] = label
    payload["sender"]["login"] = login
    payload["sender"]["type"] = kind
    return payload


def signed(event: str, payload: dict[str, Any] | bytes, delivery: str = "72d3162e-cc78-11e3-81ab-4c9367dc0958",
           *, secret: str = SECRET, hook_id: str = "109948940") -> tuple[bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-ID": hook_id,
        "X-Hub-Signature-256": sign(secret, body),
    }
    return body, headers
