"""config.example.yaml carries daily-triage live but inactive until GITHUB_TOKEN and its repository are set."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_config
from bot.store.base import Store
from bot.loop_catalog import LoopBuildError, LoopCatalog

EXAMPLE = Path(__file__).resolve().parents[3] / "config.example.yaml"


def test_example_is_inactive_without_token_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    config = load_config(EXAMPLE, {"USER": "alice"})
    triage = config.loop("daily-triage")
    assert triage is not None and triage.schedule is not None and triage.schedule.cron == "0 9 * * mon-fri"
    assert triage.schedule.timezone
    catalog = LoopCatalog(config)
    with caplog.at_level("WARNING", logger="bot.loop_catalog"):
        assert catalog.check() == []  # the demo and the rest still work
    assert "loop daily-triage is inactive: GITHUB_TOKEN is not set and options.repository is empty" in caplog.text
    with pytest.raises(LoopBuildError, match="inactive: GITHUB_TOKEN is not set"):
        catalog.new_engine("daily-triage", "daily-triage-run-1", Store.__new__(Store), lambda: False)  # type: ignore[misc]
    assert catalog.inactive("demo") is None


def test_example_is_active_once_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_x")
    config = load_config(EXAMPLE, {"USER": "alice", "TRIAGE_REPOSITORY": "octo/ops"})
    assert LoopCatalog(config).inactive("daily-triage") is None
