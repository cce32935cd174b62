"""Every command ends with one ``loopbot: ...`` line and a documented exit code, never a traceback (issue #12)."""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bot.cli_read
from bot.cli import EXIT_FAILED, EXIT_USAGE, main

from .runtime_support import demo, write_config


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("LOOPBOT_CONFIG", raising=False)
    monkeypatch.setenv("LOOPBOT_USER", "alice")
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_loopbot", False)]:
        root.removeHandler(handler)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, [demo(review={"reviewers": {"local": ["alice"]}})])


def one_line(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the CLI; return its exit code and its single stderr line (asserting it is one line)."""
    code = main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip("\n").splitlines()
    assert len(lines) >= 1 and lines[0].startswith("loopbot: "), err
    return code, lines[0]


def test_a_database_that_cannot_be_opened_is_one_line_naming_it(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = config.parent / "state"
    (state / "loopbot.db").mkdir(parents=True)  # a directory where the database file belongs
    for command in (["status"], ["decide", "demo-1", "approve"]):
        code, line = one_line(capsys, *command, "--config", str(config))
        assert code == EXIT_FAILED
        assert str(state / "loopbot.db") in line and "cannot open or write the database" in line


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--as", "al\udcffice"], "--as"),
        (["--feedback", "caf\udce9"], "--feedback"),
        (["--set", "context.x=\udcff"], "--set"),
    ],
)
def test_argv_that_is_not_utf8_is_a_usage_error_before_anything_is_stored(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    decision = "modify" if option == "--set" else "reject"
    code, line = one_line(capsys, "decide", "demo-1", decision, *args, "--config", str(config))
    assert code == EXIT_USAGE
    assert line == f"loopbot: {option} is not valid UTF-8 text; check the terminal's encoding (LANG, LC_ALL)"
    assert not (config.parent / "state" / "loopbot.db").exists()


@pytest.mark.parametrize("depth", [300, 982, 100_000])
def test_deep_nesting_in_set_is_a_usage_error(config: Path, capsys: pytest.CaptureFixture[str], depth: int) -> None:
    value = "[" * depth + "]" * depth
    code, line = one_line(capsys, "decide", "demo-1", "modify", "--set", f"context.x={value}", "--config", str(config))
    assert code == EXIT_USAGE
    assert line.startswith("loopbot: context.x: ")


@pytest.mark.parametrize("value", ["NaN", "1e999", "-Infinity"])
def test_non_finite_numbers_in_set_are_a_usage_error(
    config: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    code, line = one_line(capsys, "decide", "demo-1", "modify", "--set", f"context.x={value}", "--config", str(config))
    assert code == EXIT_USAGE and "not a finite number" in line


def test_a_symlinked_serve_lock_stops_serve_and_its_target_is_untouched(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = config.parent / "victim.txt"
    victim.write_text("precious\n", encoding="utf-8")
    state = config.parent / "state"
    state.mkdir()
    (state / "serve.lock").symlink_to(victim)
    code, line = one_line(capsys, "serve", "--config", str(config))
    assert code == EXIT_FAILED
    assert str(state / "serve.lock") in line and "symlink" in line
    assert victim.read_text(encoding="utf-8") == "precious\n"


def failing(exc: BaseException) -> Any:
    def command(*args: object) -> int:
        raise exc

    return command


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (errno.ENOSPC, "No space left on device"),
        (errno.EACCES, "Permission denied"),
        (errno.EROFS, "Read-only file system"),
    ],
)
def test_os_errors_at_the_command_boundary_name_the_file(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int, text: str
) -> None:
    target = str(config.parent / "state" / "reviews" / "demo-1.json")
    monkeypatch.setattr(bot.cli_read, "cmd_status", failing(OSError(code, text, target)))
    exit_code, line = one_line(capsys, "status", "--config", str(config))
    assert exit_code == EXIT_FAILED
    assert line == f"loopbot: {target}: {text}"


def test_unicode_and_recursion_errors_at_the_command_boundary_are_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = UnicodeEncodeError("utf-8", "x\udcff", 1, 2, "surrogates not allowed")
    monkeypatch.setattr(bot.cli_read, "cmd_status", failing(bad))
    code, line = one_line(capsys, "status", "--config", str(config))
    assert code == EXIT_FAILED and "not valid UTF-8" in line
    monkeypatch.setattr(bot.cli_read, "cmd_status", failing(RecursionError("maximum recursion depth exceeded")))
    code, line = one_line(capsys, "status", "--config", str(config))
    assert code == EXIT_FAILED and "nested too deeply" in line
