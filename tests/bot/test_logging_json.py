"""``logging.format: json``: one JSON object a line, whatever the message or traceback holds; secrets redacted."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import ConfigError, load_config
from bot.logging import setup_logging

from .runtime_support import demo, write_config


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    setup_logging(stream=out, secrets=["s3cret-value"], repeat_interval=0, format="json")
    yield out
    setup_logging(stream=io.StringIO())  # put the text format back for the other tests


def test_every_record_is_one_parsable_line(stream: io.StringIO) -> None:
    log = logging.getLogger("bot.test")
    log.info("two\nlines and a token xoxb-1234567890-abcdef and s3cret-value")
    try:
        raise RuntimeError("boom\nforged line")
    except RuntimeError:
        log.warning("step failed", exc_info=True)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "INFO" and first["logger"] == "bot.test"
    assert first["message"] == "two\nlines and a token *** and ***"
    assert second["message"] == "step failed" and "RuntimeError: boom" in second["traceback"]
    assert "test_logging_json.py" in second["traceback"]


def test_the_config_takes_logging_format_and_names_a_wrong_one(tmp_path: Path) -> None:
    assert load_config(write_config(tmp_path, [demo()], logging={"format": "json"}), environ={}).logging.format == \
        "json"
    with pytest.raises(ConfigError, match="logging.format"):
        load_config(write_config(tmp_path, [demo()], logging={"format": "xml"}), environ={})
