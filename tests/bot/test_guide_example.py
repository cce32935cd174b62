"""docs/writing-loops.md is true: its commands run as written, its preset table holds, its errors are what check says.

The commands run as real ``loopbot`` processes on a copy of examples/myloops.py
and examples/config.yaml in a temp folder, with no PYTHONPATH: the module is
found only because the config's folder is searched first.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import load_config
from bot.patterns import load_factory
from bot.loop_catalog import LoopCatalog, checkpoint_config_for
from loop_engine.checkpoint import CheckpointPresets, HumanCheckpoint, HumanDecision, ReviewResponse
from loop_engine.types import LoopStatus

from .runtime_support import wait_for

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "writing-loops.md"
#: What serve logs when the run completes (the line the README documents for the demo).
COMPLETED = "INFO bot.runner: run notes-run-1 completed"
LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT[0]).exists():  # not installed as a script: run the module (found through the install)
    LOOPBOT = [sys.executable, "-m", "bot.cli"]


def _block_after(marker: str, fence: str) -> str:
    """The first fenced block (```fence) after the HTML comment containing ``marker``."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(rf"```{fence}\n(.*?)```", re.S).search(text, start)
    assert match is not None, f"no ```{fence} block after {marker!r} in {GUIDE}"
    return match.group(1)


def _table_after(marker: str) -> list[list[str]]:
    """The rows (cells stripped) of the first markdown table after ``marker``, header and rule left out."""
    text = GUIDE.read_text(encoding="utf-8")
    lines = text[text.index(marker):].splitlines()[1:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[2:]


def guide_commands() -> list[list[str]]:
    block = _block_after("The commands below are run", "sh")
    return [words for line in block.splitlines() if (words := shlex.split(line, comments=True))]


class Session:
    """A shell session following the guide: a home folder, a current directory, an environment."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.cwd = REPO
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("PYTHONPATH", "LOOPBOT_CONFIG", "LOOPBOT_USER", "PORT")}
        self.env.update(HOME=str(home), USER="alice", PORT="0")  # PORT=0: a free port, not 8000
        self.server: subprocess.Popen[str] | None = None

    def path(self, word: str) -> Path:
        return self.home / word[2:] if word.startswith("~/") else self.cwd / word

    def loopbot(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*LOOPBOT, *args], cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=60)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    home = tmp_path / "home"
    home.mkdir()
    shell = Session(home)
    try:
        yield shell
    finally:
        if shell.server is not None and shell.server.poll() is None:
            shell.server.kill()
            shell.server.wait(timeout=10)


def test_the_guides_commands_run_the_example_loop_from_check_to_completed(session: Session) -> None:
    commands = guide_commands()
    assert [c[:2] for c in commands if c[0] == "loopbot"] == [
        ["loopbot", "check"], ["loopbot", "run"], ["loopbot", "decide"], ["loopbot", "serve"], ["loopbot", "status"],
    ], commands
    for words in commands:
        name, args = words[0], words[1:]
        if name == "source":  # activating the venv: we call its loopbot directly
            continue
        if name == "mkdir":
            session.path(args[0]).mkdir()
        elif name == "cp":
            for source in args[:-1]:
                shutil.copy(session.path(source), session.path(args[-1]))
        elif name == "cd":
            session.cwd = session.path(args[0])
        elif name == "loopbot" and args[0] == "serve":
            log_path = session.home / "serve.log"
            with log_path.open("w") as log:  # the child keeps its own copy of the descriptor
                session.server = subprocess.Popen([*LOOPBOT, *args], cwd=session.cwd, env=session.env, stdout=log,
                                                  stderr=subprocess.STDOUT, text=True)
            wait_for(lambda path=log_path: COMPLETED in path.read_text(), timeout=30,
                     what=f"serve to apply the approval and complete notes-run-1 (log: {log_path})")
            session.server.send_signal(signal.SIGTERM)
            assert session.server.wait(timeout=15) == 0, log_path.read_text()
        elif name == "loopbot":
            done = session.loopbot(*args)
            assert done.returncode == 0, (words, done.stdout, done.stderr)
            if args[0] == "status":  # the review is answered and gone from the open ones; a listed run is completed
                assert "notes-1" not in done.stdout.partition("review")[2] or "no open reviews" in done.stdout
                lines = [line for line in done.stdout.splitlines() if "notes-run-1" in line]
                assert all("completed" in line for line in lines), done.stdout
                continue
            expected = {
                "check": "notes: factory myloops:build",
                "run": "review notes-1",
                "decide": "decided: approve by local:alice",
            }[args[0]]
            assert expected in done.stdout, (words, done.stdout)
            if args[0] == "run":  # the review file shows what approving does, as the guide says
                review = (session.cwd / "state" / "local-reviews" / "notes-1.md").read_text(encoding="utf-8")
                assert review.split("\n")[1] == "# Review notes-1: Approve to publish the release notes for loopbot"
                assert "### The draft" in review and "- Faster start-up" in review, review
        else:
            raise AssertionError(f"the test does not know how to run {words} from the guide; teach it")
    assert session.cwd == session.home / "notes-bot"
    assert "PYTHONPATH" not in session.env


def _copied(folder: Path, module: str = "myloops", text: str | None = None) -> Path:
    """The example config and (a version of) the module in ``folder``; the config's factory names ``module``."""
    folder.mkdir(parents=True, exist_ok=True)
    config = (REPO / "examples" / "config.yaml").read_text(encoding="utf-8")
    (folder / "config.yaml").write_text(config.replace("myloops:build", f"{module}:build"), encoding="utf-8")
    source = (REPO / "examples" / "myloops.py").read_text(encoding="utf-8") if text is None else text
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    return folder / "config.yaml"


def test_the_config_folder_is_searched_whatever_the_current_directory(session: Session, tmp_path: Path) -> None:
    config = _copied(tmp_path / "project")
    session.cwd = tmp_path  # neither the config's folder nor the repository
    done = session.loopbot("--config", str(config), "check")
    assert done.returncode == 0, done.stderr
    assert "notes: factory myloops:build" in done.stdout


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """check puts the config's folder on sys.path and imports the module: undo both after the test."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.startswith(("mylops", "myloops", "broken")):  # myloops_helper too
            del sys.modules[name]


def _problems(config: Path) -> list[str]:
    return LoopCatalog(load_config(config), config_dir=config.parent).check()


@pytest.mark.usefixtures("clean_imports")
def test_a_module_not_found_names_the_config_folder_and_pythonpath(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONPATH", raising=False)
    config = _copied(tmp_path / "project")
    config.write_text(config.read_text().replace("myloops:build", "mylops:build"))
    [problem] = _problems(config)
    assert problem.startswith('loops[0].factory: cannot import mylops: module "mylops" not found')
    assert f"the config's folder ({config.parent.resolve()})" in problem
    assert "PYTHONPATH (not set)" in problem
    assert problem.endswith('In the config\'s folder: did you mean "myloops"?')


@pytest.mark.usefixtures("clean_imports")
@pytest.mark.parametrize(
    ("source", "line", "error"),
    [
        ("import os\n\ndef build(options:\n    pass\n", 3, "SyntaxError"),
        ("import os\nimport no_such_dependency_xyz\n", 2,
         "ModuleNotFoundError: No module named 'no_such_dependency_xyz'"),
        ("from loop_engine.types import NoSuchName\n", 1, "ImportError: cannot import name 'NoSuchName'"),
        ("import json\n\nSETTINGS = json.loads('{')\n", 3, "JSONDecodeError"),
    ],
    ids=["syntax-error", "missing-dependency", "bad-import", "error-at-import"],
)
def test_an_error_inside_the_module_names_its_file_and_line(tmp_path: Path, source: str, line: int,
                                                            error: str) -> None:
    config = _copied(tmp_path / "project", module="broken", text=source)
    [problem] = _problems(config)
    assert problem.startswith(f"loops[0].factory: cannot import broken: {error}"), problem
    assert f"at {config.parent.resolve() / 'broken.py'} line {line}" in problem, problem


def _run_example(tmp_path: Path, block: dict[str, Any] | None, ask: bool) -> LoopStatus:
    """The example under ``checkpoint: block``, as the bot builds it; the status it stops with."""
    spec_config = {"loops": [{"name": "notes", "factory": "examples.myloops:build",
                              "options": {"ask_before_publish": ask}}]}
    if block is not None:
        spec_config["loops"][0]["checkpoint"] = block
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(spec_config), encoding="utf-8")
    config = load_config(path)
    loop = config.loops[0]
    spec = load_factory("examples.myloops:build")(dict(loop.options))
    engine = spec.engine_factory(checkpoint=HumanCheckpoint(checkpoint_config_for(loop, tmp_path)))
    result = asyncio.run(engine.run(spec.context_factory(), trace_id="notes-run-1"))
    assert result.status in (LoopStatus.PAUSED, LoopStatus.COMPLETED), result
    return result.status


PRESET_ROWS = _table_after("Each row below is checked against the example loop")


@pytest.mark.parametrize("row", PRESET_ROWS, ids=[row[0] for row in PRESET_ROWS])
def test_each_row_of_the_guides_preset_table_holds_for_the_example(tmp_path: Path, row: list[str]) -> None:
    block = None if row[0] == "(none)" else yaml.safe_load(row[0].strip("`"))
    expected = {"pauses": LoopStatus.PAUSED, "runs through": LoopStatus.COMPLETED}
    assert _run_example(tmp_path, block, ask=False) is expected[row[2]], row
    assert _run_example(tmp_path, block, ask=True) is expected[row[3]], row


def test_the_preset_table_covers_every_preset() -> None:
    presets = {name for name in vars(CheckpointPresets) if not name.startswith("_")}
    named = {yaml.safe_load(row[0].strip("`"))["preset"] for row in PRESET_ROWS if row[0] != "(none)"}
    assert named == presets
    assert "(none)" in [row[0] for row in PRESET_ROWS]


@pytest.mark.usefixtures("clean_imports")
def test_the_module_may_import_its_siblings_in_the_config_folder(tmp_path: Path) -> None:
    example = (REPO / "examples" / "myloops.py").read_text(encoding="utf-8")
    config = _copied(tmp_path / "project", text=example + "\nimport myloops_helper  # noqa: E402\n")
    (config.parent / "myloops_helper.py").write_text("GREETING = 'hi'\n", encoding="utf-8")
    assert _problems(config) == []
    assert "myloops_helper" in sys.modules


@pytest.mark.usefixtures("clean_imports")
def test_a_config_folder_without_the_module_is_not_put_on_the_import_path(tmp_path: Path) -> None:
    """It holds config.yaml and state/, nothing to import: searching it could only shadow other modules."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"loops": [{"name": "notes", "factory": "examples.myloops:build"}]}))
    assert _problems(config) == []
    assert str(tmp_path.resolve()) not in sys.path


@pytest.mark.parametrize(
    ("decision", "status", "drafts"),
    # a rejected run ends as the engine's FAILED; the bot shows it as `rejected` with the reason
    [("approve", LoopStatus.COMPLETED, 1), ("reject", LoopStatus.FAILED, 1), ("retry", LoopStatus.PAUSED, 2)],
)
def test_what_each_answer_does_as_the_guide_says(tmp_path: Path, decision: str, status: LoopStatus,
                                                 drafts: int) -> None:
    """approve publishes; reject ends the run without publishing; retry drafts again and asks again."""
    spec = load_factory("examples.myloops:build")({})
    engine = spec.engine_factory(checkpoint=HumanCheckpoint(checkpoint_config_for_none(tmp_path)))
    paused = asyncio.run(engine.run(spec.context_factory(), trace_id="notes-run-1"))
    assert paused.status is LoopStatus.PAUSED and paused.review_request is not None
    assert "publish the notes for my project" in paused.review_request.context["reason"]
    proposal = paused.review_request.proposal
    assert proposal is not None and proposal.summary == "Approve to publish the release notes for my project"
    fresh = spec.engine_factory(checkpoint=HumanCheckpoint(checkpoint_config_for_none(tmp_path)))
    response = ReviewResponse(checkpoint_id=paused.review_request.checkpoint_id, decision=HumanDecision(decision),
                              reviewer="local:alice", feedback="no" if decision == "reject" else "")
    result = asyncio.run(fresh.resume(engine.state, response))
    assert result.status is status
    assert sum(1 for o in fresh.state.observations if (o.step_id or "").startswith("draft")) == drafts
    published = [o for o in fresh.state.observations if o.step_id == "publish"]
    assert bool(published) is (decision == "approve")
    assert spec.summarize is not None
    assert spec.summarize(result) == {"approve": "published the notes (5 lines)"}.get(
        decision, "the notes were not published")


def checkpoint_config_for_none(tmp_path: Path) -> Any:
    """The checkpoint of a loop with no `checkpoint:` block, as the bot makes it."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"loops": [{"name": "notes", "factory": "examples.myloops:build"}]}))
    return checkpoint_config_for(load_config(config).loops[0], tmp_path)
