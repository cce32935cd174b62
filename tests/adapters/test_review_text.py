"""The diagnostics a reviewer reads: when the loop asked, with the offset that places it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest

from adapters.review_text import diagnostics_lines
from loop_engine.checkpoint import CheckpointTrigger
from loop_engine.review import ReviewRequest


def _asked_at(timestamp: datetime) -> str:
    request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, timestamp=timestamp)
    [line] = [line for line in diagnostics_lines(request) if line.startswith("- **Asked at:**")]
    return line.removeprefix("- **Asked at:** ")


def test_the_engines_naive_local_time_is_shown_with_this_machines_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        assert _asked_at(datetime(2026, 1, 5, 9, 30)) == "2026-01-05T09:30:00+01:00"
        assert _asked_at(datetime(2026, 7, 5, 9, 30)) == "2026-07-05T09:30:00+02:00"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_time_that_has_its_offset_keeps_it() -> None:
    assert _asked_at(datetime(2026, 1, 5, 9, 30, tzinfo=UTC)) == "2026-01-05T09:30:00+00:00"
    tokyo = timezone(timedelta(hours=9))
    assert _asked_at(datetime(2026, 1, 5, 9, 30, tzinfo=tokyo)) == "2026-01-05T09:30:00+09:00"
