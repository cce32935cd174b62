"""What goes over the wire to GitHub (#18, item 7), recorded by the fake server: version, media type, bodies.

Also the voter's words that loopbot quotes back: inert like all loop and voter text.
"""

from __future__ import annotations

import re

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.channel import Answer, AnswerKind, Target
from adapters.github.channel import GitHubChannel
from adapters.github.client import GitHubClient, make_github
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO, decided, make_post


def test_every_request_names_the_api_version_and_the_token_request_the_current_media_type(fake: FakeGitHub) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    client = GitHubClient(make_github(fake.base_url, app_id=42, private_key=pem, installation_id=9))
    channel = GitHubChannel(client, bot_login=fake.bot_login)
    ref = channel.post_request(Target("github", repository=REPO, issue=42), make_post())
    channel.post_update(ref, decided("approve"), "Decided: APPROVE by github:alice at 2026-01-02T10:00:00Z")
    token, *rest = fake.calls
    assert token.path == "/app/installations/9/access_tokens"
    assert token.headers["accept"] == "application/vnd.github+json"  # not machine-man-preview
    assert rest and {call.headers.get("x-github-api-version") for call in fake.calls} == {"2022-11-28"}
    labelled = [call.body for call in rest if call.method == "POST" and call.path.endswith("/labels")]
    assert labelled == [{"labels": ["loopbot:awaiting-review"]}, {"labels": ["loopbot:approved"]}]
    assert fake.labels_of(REPO, 42) == ["loopbot:approved"]


def test_the_voters_quoted_words_are_inert(channel: GitHubChannel, fake: FakeGitHub) -> None:
    words = "/reject cc @octo/ops-team, see [https://github.com/octo/ops](https://evil.example/steal) <img src=x>"
    vote = fake.add_comment(REPO, 42, words, "alice")
    respond = {"repository": REPO, "issue": 42, "comment_id": vote["id"], "login": "alice", "quote": words,
               "key": f"github:comment:{vote['id']}", "created_at": vote["created_at"]}
    channel.answer(respond, Answer(AnswerKind.REFUSED, "alice may not answer: ask @bob [here](https://evil.example)"))
    [reply] = [c for c in fake.comments_on(REPO, 42) if c["id"] != vote["id"]]
    body = reply["body"]
    assert "@alice alice may not answer" in body  # the voter loopbot answers is the one mention
    assert not re.search(r"@[A-Za-z0-9]", body.replace("@alice alice", ""))
    assert not re.search(r"\][(\[:]", body) and "<img" not in body
