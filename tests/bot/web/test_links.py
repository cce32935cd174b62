"""The signed review links and the operator token: what opens a page, and what does not."""

from __future__ import annotations

import base64
from datetime import timedelta

from bot.web.links import ReviewLinks, bearer_ok

from ..runtime_support import T0, FakeClock

SECRET = "s3cret-signing-key-0123456789abcdef"


def links(clock: FakeClock, secret: str = SECRET) -> ReviewLinks:
    return ReviewLinks(secret, "https://bot.example.com/", timedelta(days=30), clock)


def test_a_link_opens_its_own_review_until_it_expires() -> None:
    clock = FakeClock(T0)
    signed = links(clock)
    url = signed.url("demo-1")
    assert url.startswith("https://bot.example.com/reviews/demo-1?t=")
    token = url.split("?t=", 1)[1]
    assert signed.valid("demo-1", token)
    clock.advance(days=29, hours=23)
    assert signed.valid("demo-1", token)
    clock.advance(hours=1)
    assert not signed.valid("demo-1", token)


def test_a_link_is_bound_to_its_review_and_to_the_secret() -> None:
    clock = FakeClock(T0)
    token = links(clock).token("demo-1")
    assert not links(clock).valid("demo-2", token)
    assert not links(clock, secret="another-secret-0123456789abcdef").valid("demo-1", token)


def test_a_changed_expiry_or_a_garbled_token_opens_nothing() -> None:
    clock = FakeClock(T0)
    signed = links(clock)
    expires, signature = signed.token("demo-1").split(".")
    assert not signed.valid("demo-1", f"{int(expires) + 86400}.{signature}")
    for garbled in ("", None, "abc", f"{expires}.", f".{signature}", f"{expires}.{signature}x", "9" * 300,
                    f"-1.{signature}", f"{expires}.{signature[:-1]}é"):
        assert not signed.valid("demo-1", garbled)


def test_the_operator_token_is_taken_as_bearer_or_as_a_basic_auth_password() -> None:
    token = "operator-token-0123456789abcdef"
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    assert bearer_ok(f"Bearer {token}", token)
    assert bearer_ok(f"bearer   {token} ", token)
    assert bearer_ok(f"Basic {basic}", token)
    wrong = base64.b64encode(b"anyone:nope").decode()
    for header in (None, "", f"Bearer {token}x", "Bearer", f"Token {token}", f"Basic {wrong}", "Basic !!!",
                   f"Basic {base64.b64encode(token.encode()).decode()}"):
        assert not bearer_ok(header, token)
