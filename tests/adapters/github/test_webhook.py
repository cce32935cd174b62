"""The webhook route through Starlette's TestClient, with real payloads signed as GitHub signs them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from adapters.channel import Reply
from adapters.commands import Command
from adapters.github.webhook import MAX_BODY_BYTES, sign, signature_ok, webhook_route
from loop_engine.checkpoint import HumanDecision

from .payloads import SECRET, comment_payload, fixture, label_payload, signed


class Recorder:
    def __init__(self) -> None:
        self.submitted: list[list[Reply]] = []
        self.deliveries: list[str] = []
        self.batches: list[int] = []  # deliveries per accept call

    def accept(self, deliveries: Sequence[tuple[str, list[Reply]]]) -> list[bool]:
        self.batches.append(len(deliveries))
        news = []
        for key, replies in deliveries:
            new = key not in self.deliveries
            self.deliveries.append(key)
            if new:
                self.submitted.append(replies)
            news.append(new)
        return news


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


def make_client(rec: Recorder, **kwargs: Any) -> TestClient:
    route = webhook_route(["old-secret", SECRET], rec.accept, **kwargs)
    return TestClient(Starlette(routes=[route]))


@pytest.fixture
def client(rec: Recorder) -> TestClient:
    return make_client(rec, bot_login="loopbot-app[bot]")


def test_documented_signature_vector() -> None:
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign("It's a Secret to Everybody", b"Hello, World!") == expected
    assert signature_ok(["x", "It's a Secret to Everybody"], b"Hello, World!", expected)
    assert not signature_ok(["x"], b"Hello, World!", expected)
    assert not signature_ok(["It's a Secret to Everybody"], b"Hello, World!", expected.replace("sha256=", ""))


def test_valid_approve_is_submitted(client: TestClient, rec: Recorder) -> None:
    body, headers = signed("issue_comment", comment_payload("/approve triage-17"))
    response = client.post("/github/webhook", content=body, headers=headers)
    assert response.status_code == 200 and response.json() == {"votes": 1}
    ((reply,),) = rec.submitted
    assert reply.command == Command(HumanDecision.APPROVE, "triage-17", "")
    assert reply.review_id == "triage-17" and reply.voter.qualified == "github:alice"
    assert rec.deliveries == [f"github:comment:{reply.respond['comment_id']}"]  # from the signed body


def test_an_older_secret_still_verifies(rec: Recorder, client: TestClient) -> None:
    body, headers = signed("issue_comment", comment_payload("/approve"), secret="old-secret")
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 200


@pytest.mark.parametrize("signature", [None, "", "sha256=00", "sha1=abc", "wrong"])
def test_bad_or_missing_signature_is_401_and_records_nothing(client: TestClient, rec: Recorder,
                                                             signature: str | None) -> None:
    body, headers = signed("issue_comment", comment_payload("/approve"))
    if signature is None:
        del headers["X-Hub-Signature-256"]
    else:
        headers["X-Hub-Signature-256"] = signature
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 401
    assert rec.submitted == [] and rec.deliveries == []


def test_a_body_changed_after_signing_is_401(client: TestClient, rec: Recorder) -> None:
    body, headers = signed("issue_comment", comment_payload("/reject nope"))
    tampered = body.replace(b"/reject nope", b"/approve    ")
    assert client.post("/github/webhook", content=tampered, headers=headers).status_code == 401
    assert rec.submitted == []


def test_malformed_json_is_400(client: TestClient, rec: Recorder) -> None:
    body, headers = signed("issue_comment", b'{"action": "created", ')
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 400
    body, headers = signed("issue_comment", b"[1, 2]")
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 400
    assert rec.deliveries == []


def test_ping_pongs(client: TestClient) -> None:
    body, headers = signed("ping", fixture("ping"))
    response = client.post("/github/webhook", content=body, headers=headers)
    assert response.status_code == 200 and response.json() == {"msg": "pong"}


@pytest.mark.parametrize("event", ["push", "pull_request", "star", ""])
def test_unused_events_are_acknowledged_and_ignored(client: TestClient, rec: Recorder, event: str) -> None:
    body, headers = signed(event, {"zen": "x"})
    response = client.post("/github/webhook", content=body, headers=headers)
    assert 200 <= response.status_code < 300
    assert rec.deliveries == [] and rec.submitted == []


def test_oversized_body_is_413(rec: Recorder) -> None:
    small = make_client(rec)
    big = b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}"
    body, headers = signed("issue_comment", big)
    assert small.post("/github/webhook", content=body, headers=headers).status_code == 413
    # a lying Content-Length is caught while reading
    tiny = make_client(rec, max_body_bytes=1000)

    def chunks() -> Any:
        yield b"{" + b" " * 600
        yield b" " * 600 + b"}"

    headers.pop("Content-Length", None)
    assert tiny.post("/github/webhook", content=chunks(), headers=headers).status_code == 413
    assert rec.deliveries == []


def test_redelivery_counts_once(client: TestClient, rec: Recorder) -> None:
    body, headers = signed("issue_comment", comment_payload("/approve"))
    first = client.post("/github/webhook", content=body, headers=headers)
    again = client.post("/github/webhook", content=body, headers=headers)
    assert first.json() == {"votes": 1}
    assert again.status_code == 200 and "duplicate" in again.json()
    assert len(rec.submitted) == 1


@pytest.mark.parametrize("text", ["```\n/approve\n```", "> /approve", "<!-- /approve -->", "no command here"])
def test_commands_hidden_in_markdown_are_not_votes(client: TestClient, rec: Recorder, text: str) -> None:
    body, headers = signed("issue_comment", comment_payload(text))
    response = client.post("/github/webhook", content=body, headers=headers)
    assert response.status_code == 202
    assert rec.submitted == [] and rec.deliveries == []


@pytest.mark.parametrize(("login", "kind"), [("dependabot[bot]", "Bot"), ("loopbot-app[bot]", "User")])
def test_bot_comments_are_ignored(client: TestClient, rec: Recorder, login: str, kind: str) -> None:
    body, headers = signed("issue_comment", comment_payload("/approve", login, kind=kind))
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 202
    assert rec.submitted == []


def test_label_vote(client: TestClient, rec: Recorder) -> None:
    body, headers = signed("issues", label_payload("loopbot:reject"), delivery="d-label")
    assert client.post("/github/webhook", content=body, headers=headers).json() == {"votes": 1}
    ((reply,),) = rec.submitted
    assert reply.command == Command(HumanDecision.REJECT, None, "rejected by label")
    assert reply.dedupe_key == "github:label:codertocat/hello-world#1:loopbot:reject:alice"


def test_form_encoded_payload(client: TestClient, rec: Recorder) -> None:
    from urllib.parse import urlencode

    raw = urlencode({"payload": json.dumps(comment_payload("/approve"))}).encode()
    body, headers = signed("issue_comment", raw)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    assert client.post("/github/webhook", content=body, headers=headers).json() == {"votes": 1}


def test_get_is_not_allowed(client: TestClient) -> None:
    assert client.get("/github/webhook").status_code == 405


def test_no_secret_is_a_configuration_error(rec: Recorder) -> None:
    with pytest.raises(ValueError, match="secret"):
        webhook_route([""], rec.accept)


def test_the_same_signed_body_under_a_fresh_delivery_id_is_the_same_delivery(client: TestClient,
                                                                             rec: Recorder) -> None:
    comment, _ = signed("issue_comment", comment_payload("/approve"), delivery="d-1")
    label, _ = signed("issues", label_payload("loopbot:approve"), delivery="d-2")
    for body, event in ((comment, "issue_comment"), (label, "issues")):
        for delivery in ("first-id", "fresh-id"):
            _, headers = signed(event, body, delivery=delivery)
            client.post("/github/webhook", content=body, headers=headers)
    assert len(rec.submitted) == 2 and len(set(rec.deliveries)) == 2  # one of each: the header is not what counts


def test_deliveries_arriving_during_a_commit_are_recorded_together_in_the_next_one() -> None:
    """While one ``accept`` call is in flight the requests that come wait on the loop and share the next call."""
    import asyncio
    import threading

    import httpx

    rec = Recorder()
    first_in = threading.Event()
    release = threading.Event()

    def accept(deliveries: Sequence[tuple[str, list[Reply]]]) -> list[bool]:
        if not rec.batches:
            first_in.set()
            assert release.wait(10), "the test never released the first commit"
        return rec.accept(deliveries)

    route = webhook_route([SECRET], accept, bot_login="loopbot-app[bot]")
    bodies_read = 0

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            nonlocal bodies_read
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body"):
                bodies_read += 1  # the endpoint goes on without awaiting until it waits for its commit
            return message
        await Starlette(routes=[route])(scope, counted, send)

    requests = [signed("issue_comment", comment_payload("/approve", comment_id=1000 + n)) for n in range(6)]

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot") as client:
            first = asyncio.create_task(client.post("/github/webhook", content=requests[0][0],
                                                    headers=requests[0][1]))
            while not first_in.is_set():
                await asyncio.sleep(0.001)
            rest = [asyncio.create_task(client.post("/github/webhook", content=body, headers=headers))
                    for body, headers in requests[1:]]
            deadline = asyncio.get_running_loop().time() + 10
            while bodies_read < len(requests) and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.001)
            release.set()
            return [await first, *[await each for each in rest]]

    answers = asyncio.run(run())
    assert [answer.status_code for answer in answers] == [200] * 6
    assert all(answer.json() == {"votes": 1} for answer in answers)
    assert rec.batches == [1, 5], "the five that came during the first commit share the second"
    assert len(set(rec.deliveries)) == 6


def test_a_commit_that_fails_answers_500_and_the_next_delivery_is_recorded() -> None:
    """No 200 without its commit: a failed ``accept`` fails its requests (GitHub retries), and the route goes on."""
    rec = Recorder()
    failures = [OSError("disk full")]

    def accept(deliveries: Sequence[tuple[str, list[Reply]]]) -> list[bool]:
        if failures:
            raise failures.pop()
        return rec.accept(deliveries)

    client = TestClient(Starlette(routes=[webhook_route([SECRET], accept)]), raise_server_exceptions=False)
    body, headers = signed("issue_comment", comment_payload("/approve", comment_id=7))
    assert client.post("/github/webhook", content=body, headers=headers).status_code == 500
    assert rec.deliveries == []
    assert client.post("/github/webhook", content=body, headers=headers).json() == {"votes": 1}
    assert rec.deliveries == ["github:comment:7"]
