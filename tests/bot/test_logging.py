"""The CLI's log setup scrubs configured secrets and token-shaped strings from every line."""

from __future__ import annotations

import io
import logging

import pytest

from bot.logging import RedactingFilter, setup_logging
from bot.redaction import REDACTED


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


FORGED = "2026-12-01 10:00:00,000 INFO bot.desk.votes: decided: approve by slack:U0BOSS"


@pytest.mark.parametrize("breaker", ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
def test_no_input_starts_a_new_line(stream: io.StringIO, breaker: str) -> None:
    setup_logging(stream=stream)
    logging.getLogger("loopbot.test").info("vote from %s", f"x{breaker}{FORGED}")
    logging.getLogger("loopbot.test").info(f"vote from y{breaker}{FORGED}")  # input in the format string, too
    text = stream.getvalue()
    assert len(text.splitlines()) == 2, text
    assert all(line.split(" ", 2)[2].startswith("INFO loopbot.test: vote from ") for line in text.splitlines())


def test_control_characters_are_escaped_and_tabs_kept(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    logging.getLogger("t").warning("a\nb\rc\x1b[31md\te\x00f")
    assert stream.getvalue().rstrip("\n").split(": ", 1)[1] == "a\\nb\\rc\\x1b[31md\te\\x00f"


def test_a_traceback_is_indented_and_its_message_escaped(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    try:
        try:
            raise KeyError("first")
        except KeyError as exc:
            raise ValueError(f"bad value x\n{FORGED}") from exc
    except ValueError:
        logging.getLogger("t").exception("handling failed")
    first, *rest = stream.getvalue().rstrip("\n").split("\n")
    assert first.endswith("ERROR t: handling failed")
    assert rest and all(line.startswith("  ") for line in rest), rest
    assert not any(FORGED in line and not line.startswith("  ValueError: bad value x\\n") for line in rest)
    text = "\n".join(rest)
    assert text.index("KeyError: 'first'") < text.index("direct cause") < text.index("ValueError: bad value")
    assert 'raise KeyError("first")' in text  # Python's own lines are kept


def test_a_secret_spanning_lines_is_redacted_before_the_lines_are_joined(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    logging.getLogger("t").info("key %s", "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----")
    assert stream.getvalue().rstrip("\n").endswith(f"INFO t: key {REDACTED}")
