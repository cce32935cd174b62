"""A command whose reader goes away (``loopbot status | head -1``) stops quietly, as Unix tools do.

Each command runs as a person runs it, a fresh ``python -m bot.cli``, with
stdout a pipe whose read end is closed before the command starts: every
write to it fails (EPIPE), which is what ``head`` leaves behind once it has
its line, without depending on when ``head`` exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import EXIT_PIPE_CLOSED

REPO = Path(__file__).resolve().parents[2]
#: Enough scheduled loops that status and loops print far more than a pipe's or an io buffer's worth.
LOOPS = 300


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pipe")
    lines = ["state_dir: state", "loops:"] + [
        f"  - {{name: loop-{n:03d}, pattern: demo, schedule: {{cron: '0 9 * * 1-5'}}}}" for n in range(LOOPS)
    ]
    path = root / "config.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        return subprocess.run([sys.executable, "-m", "bot.cli", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, cwd=REPO, timeout=120, env={**os.environ, "USER": "alice"})
    finally:
        os.close(write_end)


def run_into_a_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={**os.environ, "USER": "alice"})


@pytest.mark.parametrize("argv", [["status"], ["status", "--all"], ["loops"], ["check", "--offline"]])
def test_a_command_printing_into_a_closed_pipe_exits_141_and_says_nothing(config: Path, argv: list[str]) -> None:
    whole = run_into_a_pipe("--config", str(config), *argv)
    assert whole.returncode == 0, whole.stderr
    assert len(whole.stdout) > 16 * 1024  # more than an io buffer: the write fails inside the command's print
    cut = run_into_closed_pipe("--config", str(config), *argv)
    assert (cut.returncode, cut.stderr) == (EXIT_PIPE_CLOSED, "")


def test_a_short_output_into_a_closed_pipe_is_quiet_too(config: Path) -> None:
    """No runs yet: `status --json` prints a few lines, which wait in the buffer and fail at the last flush."""
    assert len(run_into_a_pipe("--config", str(config), "status", "--json").stdout) < 1024
    cut = run_into_closed_pipe("--config", str(config), "status", "--json")
    assert (cut.returncode, cut.stderr) == (EXIT_PIPE_CLOSED, "")


def test_a_closed_pipe_does_not_undo_the_work_done(tmp_path: Path) -> None:
    """`init` writes its file, then prints two lines into the closed pipe."""
    target = tmp_path / "new.yaml"
    cut = run_into_closed_pipe("init", str(target))
    assert (cut.returncode, cut.stderr) == (EXIT_PIPE_CLOSED, "")
    assert target.read_text(encoding="utf-8").startswith("#")


@pytest.mark.parametrize("argv", [["--help"], ["status", "--help"], ["--version"]])
def test_help_and_version_into_a_closed_pipe_say_nothing(argv: list[str]) -> None:
    """argparse swallows a failed write of its help (exit 0); either way no traceback and no error line."""
    cut = run_into_closed_pipe(*argv)
    assert cut.returncode in (0, EXIT_PIPE_CLOSED) and cut.stderr == ""


def test_a_usage_error_still_says_so_on_stderr_with_stdout_closed() -> None:
    cut = run_into_closed_pipe("nosuchcommand")
    assert cut.returncode == 2 and "invalid choice" in cut.stderr
