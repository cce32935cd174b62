"""`import bot.cli` stays light: every command loads what it needs when it runs.

Loading the engine, jsonschema, the scheduler and the web stack cost every
command - `--help`, `status`, `decide` - about 0.4 s. These checks run in a
fresh interpreter, where sys.modules shows exactly what an import pulled in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Heavy packages no command needs before it runs (serve loads the web stack itself).
HEAVY = ("apscheduler", "jsonschema", "uvicorn", "starlette", "slack_bolt", "slack_sdk", "github", "sqlalchemy",
         "httpx", "pydantic", "asyncio", "loop_engine", "adapters")


def loaded_after(code: str) -> list[str]:
    """The HEAVY top-level packages in sys.modules after running ``code`` in a new interpreter."""
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps(sorted({{name.partition('.')[0] for name in sys.modules}} & set({HEAVY!r}))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_none_of_the_heavy_packages() -> None:
    assert loaded_after("import bot.cli") == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["decide", "--help"]])
def test_help_and_version_load_none_of_them(argv: list[str]) -> None:
    code = f"import bot.cli\ntry:\n    bot.cli.main({argv!r})\nexcept SystemExit:\n    pass"
    assert loaded_after(code) == []


def test_the_probe_sees_an_import_when_there_is_one() -> None:
    """The guard can fail: a module that does load these is reported."""
    assert "apscheduler" in loaded_after("import apscheduler.triggers.cron")


@pytest.mark.parametrize("argv", [["status"], ["decide", "nosuch-1", "approve"]])
def test_status_and_decide_load_neither_the_engine_nor_the_scheduler(argv: list[str], tmp_path: Path) -> None:
    """They read the config and the store: the engine, jsonschema and the web stack are for check, run and serve."""
    config = tmp_path / "config.yaml"
    config.write_text("state_dir: ./state\nloops:\n  - {name: demo, pattern: demo, schedule: {interval: 1h}}\n")
    code = f"import bot.cli\nbot.cli.main(['--config', {str(config)!r}, *{argv!r}])"
    loaded = loaded_after(code)
    assert not {"apscheduler", "jsonschema", "uvicorn", "starlette", "slack_bolt", "github", "asyncio"} & set(loaded)


@pytest.mark.parametrize("argv", [["status"], ["decide", "nosuch-1", "approve"]])
def test_a_cron_schedule_checked_by_status_and_decide_does_not_load_the_job_store(
    argv: list[str], tmp_path: Path
) -> None:
    """Checking a cron expression needs APScheduler's trigger, never SQLAlchemy (~0.2 s) behind its job store."""
    config = tmp_path / "config.yaml"
    config.write_text("state_dir: ./state\nloops:\n  - {name: demo, pattern: demo, schedule: {cron: '0 9 * * 1-5'}}\n")
    code = f"import bot.cli\nbot.cli.main(['--config', {str(config)!r}, *{argv!r}])"
    assert "sqlalchemy" not in loaded_after(code)
