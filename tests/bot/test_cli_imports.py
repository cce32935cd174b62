"""`import bot.cli` stays light: every command loads what it needs when it runs.

Loading the engine, jsonschema, the scheduler and the web stack would cost
every command - `--help`, `status`, `decide` - beyond the start-up budget of
bench/cli_startup_bench.py. These checks run in a
fresh interpreter, where sys.modules shows exactly what an import pulled in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Heavy packages no command needs before it runs (serve loads the web stack itself).
HEAVY = ("apscheduler", "jsonschema", "uvicorn", "starlette", "slack_bolt", "slack_sdk", "github", "sqlalchemy",
         "httpx", "pydantic", "asyncio", "loop_engine", "adapters")


def modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """Every module in sys.modules after running ``code`` in a new interpreter."""
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded_after(code: str) -> list[str]:
    """The HEAVY top-level packages in sys.modules after running ``code`` in a new interpreter."""
    return sorted({name.partition(".")[0] for name in modules_after(code)} & set(HEAVY))


def test_importing_the_cli_loads_none_of_the_heavy_packages() -> None:
    assert loaded_after("import bot.cli") == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["decide", "--help"]])
def test_help_and_version_load_none_of_them(argv: list[str]) -> None:
    code = f"import bot.cli\ntry:\n    bot.cli.main({argv!r})\nexcept SystemExit:\n    pass"
    assert loaded_after(code) == []


def test_the_probe_sees_an_import_when_there_is_one() -> None:
    """The guard can fail: a module that does load these is reported."""
    assert "apscheduler" in loaded_after("import apscheduler.triggers.cron")


#: What status and decide need not load once the models have judged the config but its channel blocks
#: (bot.config_memo remembers the verdict): pydantic and the config models (importing pydantic alone is about
#: 2x a bare start-up, the models 2x more: beyond the 5x budget of bench/cli_startup_bench.py), the scheduler
#: (a cron line is APScheduler's to judge), the engine's state and persistence, and the rest of the stack. The
#: first run after an edit loads what judging needs; the budget is for the runs after it.
NOT_FOR_STATUS_OR_DECIDE = (
    "pydantic", "bot.config", "bot.config_blocks", "apscheduler", "sqlalchemy", "jsonschema", "asyncio",
    "starlette", "uvicorn", "slack_bolt", "slack_sdk", "github", "httpx", "loop_engine.engine",
    "loop_engine.types", "loop_engine.persistence", "loop_engine.checkpoint", "bot.runner", "bot.loop_catalog",
    "bot.snapshots",
)


def heavy_after(config: Path, argv: list[str]) -> list[str]:
    """What of NOT_FOR_STATUS_OR_DECIDE ``loopbot --config config ARGV`` loads, run as alice (the memo of verdicts
    beside the config, so each test starts without one)."""
    code = f"import bot.cli\nbot.cli.main(['--config', {str(config)!r}, *{argv!r}])"
    env = {**os.environ, "USER": "alice", "LOOPBOT_USER": "alice", "XDG_CACHE_HOME": str(config.parent / "memo")}
    loaded = modules_after(code, env=env)
    assert "bot.config_memo" in loaded  # the probe ran the command
    return sorted(name for name in loaded if name in NOT_FOR_STATUS_OR_DECIDE
                  or name.partition(".")[0] in NOT_FOR_STATUS_OR_DECIDE)


@pytest.mark.parametrize("argv", [["status"], ["decide", "nosuch-1", "approve"]])
def test_status_and_decide_on_the_example_config_load_no_pydantic_nor_engine(argv: list[str], tmp_path: Path) -> None:
    """The example (`loopbot init`, a cron line, a checkpoint preset): the first run has the models judge it,
    APScheduler its cron line; every later one reads their verdict."""
    config = tmp_path / "config.yaml"
    config.write_text((REPO / "config.example.yaml").read_text())
    first = heavy_after(config, argv)
    assert {"pydantic", "apscheduler.triggers.cron"} <= set(first)
    assert not {"bot.runner", "bot.loop_catalog", "loop_engine.engine", "sqlalchemy", "uvicorn"} & set(first)
    assert heavy_after(config, argv) == []


def waiting_on_demo_1(tmp_path: Path) -> Path:
    """The example config, with a run of demo waiting on review demo-1 (started by `loopbot run`)."""
    config = tmp_path / "config.yaml"
    config.write_text((REPO / "config.example.yaml").read_text())
    env = {**os.environ, "USER": "alice", "LOOPBOT_USER": "alice"}
    started = subprocess.run([sys.executable, "-m", "bot.cli", "--config", str(config), "run", "demo"],
                             capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert started.returncode == 0 and "review demo-1" in started.stdout, started.stderr
    return config


def test_status_and_a_vote_on_an_open_review_load_no_pydantic_and_no_engine(tmp_path: Path) -> None:
    """With a run waiting on review demo-1: status renders it, decide takes the whole vote path."""
    config = waiting_on_demo_1(tmp_path)
    heavy_after(config, ["status"])  # the models judge the config once
    assert heavy_after(config, ["status"]) == []
    assert heavy_after(config, ["decide", "demo-1", "approve"]) == []


def test_an_edited_config_is_judged_by_the_models_again(tmp_path: Path) -> None:
    """The guard above can fail: a changed people: list or cron line is judged again, once."""
    config = tmp_path / "config.yaml"
    config.write_text("people:\n  - {name: alice, local: alice}\n")
    heavy_after(config, ["status"])
    assert heavy_after(config, ["status"]) == []
    config.write_text("people:\n  - {name: alice, local: alice}\n  - {name: bob, local: bob}\n")
    assert "pydantic" in heavy_after(config, ["status"])
    assert heavy_after(config, ["status"]) == []
    config.write_text("loops:\n  - {name: demo, pattern: demo, schedule: {cron: '0 9 * * 1-5'}}\n")
    assert "apscheduler" in heavy_after(config, ["decide", "nosuch-1", "approve"])
    assert heavy_after(config, ["decide", "nosuch-1", "approve"]) == []


def test_an_edited_channel_block_needs_no_judging(tmp_path: Path) -> None:
    """status and decide never read slack: or github:, so a change there leaves their verdict standing."""
    config = tmp_path / "config.yaml"
    config.write_text("slack: {bot_token: xoxb-1, signing_secret: s1}\n")
    heavy_after(config, ["status"])
    config.write_text("slack: {bot_token: xoxb-2, signing_secret: s2}\ngithub: {token: ${GITHUB_TOKEN}}\n")
    assert heavy_after(config, ["status"]) == []


#: What `status` reads without (each costs its start-up; bench/cli_startup_bench.py): the channels' types and
#: the command grammar (a queued delivery's target is read only when there is one), the logging package
#: (``bot.redaction`` scrubs what it prints; the store logs only a damaged row), sockets (the store names its
#: host by ``os.uname``), file writing (the upgrade from a directory store loads it), a proposal's kinds.
NOT_FOR_STATUS = (
    "logging", "socket", "tempfile", "adapters.channel", "adapters.commands", "adapters.local",
    "adapters.review_text", "loop_engine.atomic", "loop_engine.proposal", "bot.desk", "bot.logging",
    "bot.store.sql_transfer",
)


def kept_out_after(config: Path, argv: list[str], names: tuple[str, ...]) -> list[str]:
    """Which of ``names`` (modules, or packages with their submodules) ``loopbot --config config ARGV`` loads."""
    code = f"import bot.cli\nbot.cli.main(['--config', {str(config)!r}, *{argv!r}])"
    env = {**os.environ, "USER": "alice", "LOOPBOT_USER": "alice", "XDG_CACHE_HOME": str(config.parent / "memo")}
    loaded = modules_after(code, env=env)
    assert "bot.status" in loaded or "bot.cli_decide" in loaded  # the probe ran the command
    return sorted(name for name in loaded if any(name == kept or name.startswith(kept + ".") for kept in names))


def test_status_of_an_open_review_loads_no_channel_no_logging_and_no_file_writing(tmp_path: Path) -> None:
    """A run waiting on review demo-1, its vote lines in the table: still none of them."""
    config = waiting_on_demo_1(tmp_path)
    assert "logging" in kept_out_after(config, ["status"], NOT_FOR_STATUS)  # the models judge it (and log) once
    assert kept_out_after(config, ["status"], NOT_FOR_STATUS) == []
    assert kept_out_after(config, ["status", "--json"], NOT_FOR_STATUS) == []


def test_a_decide_on_an_unknown_review_loads_no_channel_and_no_logging(tmp_path: Path) -> None:
    """The grammar judges the decision word (adapters.commands); nothing else of a vote's path loads."""
    config = tmp_path / "config.yaml"
    config.write_text((REPO / "config.example.yaml").read_text())
    kept_out = tuple(name for name in NOT_FOR_STATUS if name != "adapters.commands")
    kept_out_after(config, ["decide", "nosuch-1", "approve"], kept_out)  # the models judge the config once
    assert kept_out_after(config, ["decide", "nosuch-1", "approve"], kept_out) == []
