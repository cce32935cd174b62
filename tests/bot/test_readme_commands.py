"""The README and the pages under docs/ say what loopbot does (issue 13, item 8; issue 22, item 7).

The README is the front door and its first review is run here as written, against a real
``loopbot serve`` on a copy of config.example.yaml; the reference moved to docs/, and what it
says of the command line is read from all the pages together: the command table, the exit
codes, every ``loopbot`` command in a shell block (each must be one the parser takes), and
every link between the pages (each must lead to a file and, with ``#anchor``, to a heading).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli_grammar import EPILOG, build_parser

from .runtime_support import wait_for

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
TEXT = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT[0]).exists():  # not installed as a script: run the module (found through the install)
    LOOPBOT = [sys.executable, "-m", "bot.cli"]
#: Where each part of the old one-page README now lives, by the heading that starts it.
MOVED = {
    "commands.md": "# The command line", "exit-codes.md": "# Exit codes", "configuration.md": "# Configuration",
    "slack.md": "# Slack", "github.md": "# GitHub", "daily-triage.md": "# Daily triage",
    "durability.md": "# How it works", "postgresql.md": "# Several replicas on PostgreSQL",
    "loop-library.md": "# The loop library", "pages.md": "# Pages and metrics",
    "writing-loops.md": "# Writing your own loop",
}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [action] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _shell_lines(page: Path) -> list[tuple[str, list[str]]]:
    """Every command line of the page's ```sh blocks, split as the shell splits it (a # starting a word ends it)."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    lines = []
    for line in "\n".join(blocks).splitlines():
        words = shlex.split(re.sub(r"(^|\s)#.*", "", line))
        if words:
            lines.append((line, words))
    return lines


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_readme_is_one_page_and_each_reference_section_has_its_own_file() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 150, "the README is the front door: the reference belongs in docs/"
    for name, heading in MOVED.items():
        page = REPO / "docs" / name
        assert page.read_text(encoding="utf-8").startswith(heading + "\n"), name
        assert f"](docs/{name})" in readme, f"the README does not link docs/{name}"
        assert f"\n#{heading}\n" not in readme, f"{heading[2:]} is still in the README"
    for words in ("GitHub environment", "HumanLayer", "LangGraph", "make run", "make test"):
        assert words in readme


def test_the_command_table_names_each_everyday_command_with_its_options() -> None:
    table = [line for line in TEXT.splitlines() if line.startswith("| `loopbot ")]
    rows = {re.match(r"\| `loopbot (\w+)", line).group(1): line for line in table}  # type: ignore[union-attr]
    for name in ("serve", "run", "status", "decide", "check", "init", "cancel", "apply", "loops"):
        assert name in rows and name in _subcommands()
    assert rows["init"].startswith("| `loopbot init [PATH]`")
    assert rows["status"].startswith("| `loopbot status [--json] [--all]`")
    assert rows["check"].startswith("| `loopbot check [--offline]`")
    assert "`loopbot --version`" in TEXT
    for option in ("--all", "--json"):
        assert any(option in a.option_strings for a in _subcommands()["status"]._actions)
    assert any("--offline" in a.option_strings for a in _subcommands()["check"]._actions)


def test_the_exit_codes_read_alike_in_the_docs_and_in_help() -> None:
    flat = " ".join((REPO / "docs" / "exit-codes.md").read_text(encoding="utf-8").split())
    epilog = " ".join(EPILOG.split())
    for words in ("reject without --feedback", "an argument that is not valid UTF-8", "a symlink"):
        assert words in epilog
    for words in ("`reject` without `--feedback`", "an argument that is not valid UTF-8", "a symlink"):
        assert words in flat


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_loopbot_command_in_a_shell_block_is_one_the_command_line_takes(page: Path) -> None:
    """A renamed command or option breaks the page's copy-paste: parse each line as `loopbot` would."""
    for line, words in _shell_lines(page):
        if not words[0].endswith("loopbot"):
            continue
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            try:
                build_parser().parse_args(words[1:])
            except SystemExit as exc:
                pytest.fail(f"{page.name}: `{line.strip()}` is refused by the command line ({exc.code}): "
                            f"{stderr.getvalue()}")


def test_the_pages_hold_the_commands_a_newcomer_copies() -> None:
    commands = {page.name: [words[1:3] for _, words in _shell_lines(page) if words[0].endswith("loopbot")]
                for page in PAGES}
    assert commands["README.md"] == [["--config", "config.example.yaml"]] * 2
    assert ["decide", "daily-triage-1"] in commands["daily-triage.md"]
    assert len(commands["writing-loops.md"]) == 5  # run as written by test_guide_example.py


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_link_between_the_pages_leads_to_a_file_and_heading(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: link to {target} leads nowhere"
        if anchor:
            headings = re.findall(r"^#+ (.*)$", linked.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: {target}: no such heading"


# --- the README's first review, run as written --------------------------------------------------------------


def _block_after(marker: str, fence: str) -> str:
    text = README.read_text(encoding="utf-8")
    match = re.compile(rf"```{fence}\n(.*?)```", re.S).search(text, text.index(marker))
    assert match is not None, f"no ```{fence} block after {marker!r} in the README"
    return match.group(1)


def _as_pattern(line: str, state_dir: Path) -> re.Pattern[str]:
    """A README log line as a pattern for the real one: its pid, port, state dir and loopbot's path vary."""
    pattern = re.escape(line)
    for example, real in (("/home/alice/loopbot/state", re.escape(str(state_dir))),
                          (".venv/bin/loopbot", r"\S+"), ("8000", r"\d+"), ("4142", r"\d+")):
        pattern = pattern.replace(re.escape(example), real)
    return re.compile(r"^\S+ \S+ " + pattern)  # after the date and time of the record


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str], dict[str, str]]]:
    """`loopbot serve --config config.example.yaml` in a fresh copy of the repository's folder, as `make run`."""
    shutil.copy(REPO / "config.example.yaml", tmp_path / "config.example.yaml")
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "LOOPBOT_CONFIG", "LOOPBOT_USER", "GITHUB_TOKEN", "TRIAGE_REPOSITORY",
                          "SLACK_BOT_TOKEN", "HOST")}
    env.update(HOME=str(tmp_path), USER="alice", PORT="0")  # PORT=0: a free port, not 8000
    with (tmp_path / "serve.log").open("w") as log:
        server = subprocess.Popen([*LOOPBOT, "serve", "--config", "config.example.yaml"], cwd=tmp_path, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        yield tmp_path, server, env
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=15)


@pytest.mark.e2e
def test_the_first_review_goes_as_the_readme_says(served: tuple[Path, subprocess.Popen[str], dict[str, str]]) -> None:
    folder, server, env = served
    log = folder / "serve.log"
    wait_for(lambda: "approve with:" in log.read_text(), timeout=30, what=f"the review's line in {log}")
    lines = log.read_text().splitlines()
    assert any(line.startswith("warning: loop daily-triage is inactive") for line in lines)  # as the README says
    for line in _block_after("These lines are checked", "text").splitlines():
        pattern = _as_pattern(line, (folder / "state").resolve())
        assert any(pattern.match(real) for real in lines), (line, lines)
    review = (folder / "state" / "local-reviews" / "demo-1.md").read_text(encoding="utf-8")
    headings = [line for line in review.splitlines() if line.startswith("#")]
    assert headings[0].startswith("# Review demo-1: "), review  # what is asked, then the proposal
    assert "| Labels to add |" in review.partition("## How to answer")[0], review  # the labels for each issue
    assert headings.index("## How to answer") < headings.index("## Details"), review

    commands = [words for line in _block_after("The commands below are run", "sh").splitlines()
                if (words := shlex.split(re.sub(r"(^|\s)#.*", "", line)))]
    assert [words[0] for words in commands] == [".venv/bin/loopbot"] * 2
    for words in commands:
        args = words[1:]
        if args[-1] == "status":  # the README's next line: the server applies the decision within a second
            wait_for(lambda: "INFO bot.runner: run demo-run-1 completed" in log.read_text(), timeout=10,
                     what="the run to complete")
        done = subprocess.run([*LOOPBOT, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
        if args[-1] == "status":
            [row] = [line for line in done.stdout.splitlines() if line.startswith("demo-run-1 ")]
            assert "completed" in row.split(), done.stdout
        else:
            assert "decided: approve by local:alice" in done.stdout
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=15) == 0, log.read_text()
