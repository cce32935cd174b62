"""The CLI's log setup scrubs configured secrets and token-shaped strings from every line."""

from __future__ import annotations

import io
import logging

import pytest

from bot.logging import REDACTED, RedactingFilter, setup_logging


def test_configured_secrets_and_token_shapes_are_redacted(stream: io.StringIO) -> None:
    setup_logging(secrets=["hunter2-signing"], stream=stream)
    log = logging.getLogger("loopbot.test")
    log.info("signing with %s", "hunter2-signing")
    log.warning("token xoxb-1234-5678-abcdefgh leaked, and ghp_abcdefghijklmnopqrstuvwxyz0123")
    try:
        raise ValueError("bad secret hunter2-signing")
    except ValueError:
        log.exception("failed")
    text = stream.getvalue()
    assert "hunter2-signing" not in text and "xoxb-1234" not in text and "ghp_abc" not in text
    assert text.count(REDACTED) >= 4


def test_setup_is_idempotent(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    setup_logging(stream=stream)
    logging.getLogger("loopbot.test").info("once")
    assert stream.getvalue().count("once") == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain text", "plain text"),
        ("short ab stays", "short ab stays"),  # secrets under 4 chars would redact ordinary words
        ("key -----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY----- end", f"key {REDACTED} end"),
    ],
)
def test_redact_table(text: str, expected: str) -> None:
    assert RedactingFilter(["ab"]).redact(text) == expected
