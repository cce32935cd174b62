"""The README's command line section says what `loopbot --help` has (issue 13, item 8)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bot.cli import EPILOG, build_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def test_the_command_table_names_each_everyday_command_with_its_options() -> None:
    table = [line for line in README.splitlines() if line.startswith("| `loopbot ")]
    rows = {re.match(r"\| `loopbot (\w+)", line).group(1): line for line in table}  # type: ignore[union-attr]
    for name in ("serve", "run", "status", "decide", "check", "init"):
        assert name in rows and name in _subcommands()
    assert rows["init"].startswith("| `loopbot init [PATH]`")
    assert rows["status"].startswith("| `loopbot status [--json] [--all]`")
    assert rows["check"].startswith("| `loopbot check [--offline]`")
    assert "`loopbot --version`" in README
    for option in ("--all", "--json"):
        assert any(option in a.option_strings for a in _subcommands()["status"]._actions)
    assert any("--offline" in a.option_strings for a in _subcommands()["check"]._actions)


def test_the_exit_codes_read_alike_in_the_readme_and_in_help() -> None:
    flat = " ".join(README.split())
    epilog = " ".join(EPILOG.split())
    for words in ("reject without --feedback", "an argument that is not valid UTF-8", "a symlink"):
        assert words in epilog
    for words in ("`reject` without `--feedback`", "an argument that is not valid UTF-8", "a symlink"):
        assert words in flat
