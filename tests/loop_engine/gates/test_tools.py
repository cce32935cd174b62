"""Lint / type-check / test gates: real subprocesses, a real missing tool, a real timeout."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from loop_engine.errors import ConfigurationError
from loop_engine.gates import CommandGate, GateContext, LintGate, Severity, TestGate, TypeCheckGate

PY = sys.executable
MISSING = "loopbot-no-such-tool-7f3a"


def python(code: str, **options: object) -> CommandGate:
    return CommandGate([PY, "-c", code], **options)  # type: ignore[arg-type]


def test_exit_zero_passes_with_output_tail(tmp_path: Path) -> None:
    result = python("print('all good')").check(GateContext(working_dir=str(tmp_path)))
    assert result.passed
    assert result.details["exit_code"] == 0 and result.details["output_tail"] == "all good\n"
    assert result.details["cwd"] == str(tmp_path)


def test_nonzero_exit_fails_and_keeps_stderr_tail(tmp_path: Path) -> None:
    gate = python("import sys; print('x' * 50); sys.stderr.write('boom'); sys.exit(3)", tail_chars=10)
    result = gate.check(GateContext(working_dir=str(tmp_path)))
    assert not result.passed and result.blocks
    assert result.details["exit_code"] == 3 and "exit code 3" in result.message
    assert result.details["output_tail"].endswith("boom") and len(result.details["output_tail"]) <= 13


def test_runs_in_working_dir_with_extra_env(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("here", encoding="utf-8")
    gate = python("import os; assert open('marker.txt').read() == os.environ['GATE_FLAG'] == 'here'",
                  env={"GATE_FLAG": "here"})
    assert gate.check(GateContext(working_dir=str(tmp_path))).passed


def test_files_are_written_to_a_temp_dir_and_win_over_working_dir(tmp_path: Path) -> None:
    code = "import os; assert open('pkg/mod.py').read() == 'x = 1' and not os.path.exists('marker.txt')"
    (tmp_path / "marker.txt").write_text("", encoding="utf-8")
    context = GateContext(files={"pkg/mod.py": "x = 1", "b.txt": "b"}, working_dir=str(tmp_path))
    result = python(code).check(context)
    assert result.passed, result.details
    assert result.details["cwd"] == "<temp dir with context.files>"


@pytest.mark.parametrize("path", ["../escape.py", "/etc/evil.py", "a/../../b.py", ""])
def test_file_paths_must_stay_inside(path: str) -> None:
    result = python("pass").check(GateContext(files={path: "x"}))
    assert not result.passed and "refusing file path" in result.message


def test_nothing_to_run_on_or_bad_working_dir(tmp_path: Path) -> None:
    assert "nothing to run on" in python("pass").check(GateContext()).message
    result = python("pass").check(GateContext(working_dir=str(tmp_path / "nope")))
    assert not result.passed and "not a directory" in result.message
    assert "must be text" in python("pass").check(GateContext(files={"a.py": 1})).message  # type: ignore[dict-item]


def test_missing_tool_is_a_failure_that_says_what_to_do(tmp_path: Path) -> None:
    result = CommandGate([MISSING, "--check"]).check(GateContext(working_dir=str(tmp_path)))
    assert not result.passed and result.blocks and result.severity is Severity.ERROR
    assert MISSING in result.message and "skip_if_missing=True" in result.message
    assert result.details["skipped"] is False


def test_missing_default_tool_names_how_to_install(tmp_path: Path) -> None:
    empty_path = {"PATH": str(tmp_path)}  # nothing on PATH, whatever this machine has installed
    cases = (
        (LintGate(env=empty_path), "pip install ruff"),
        (TypeCheckGate(env=empty_path), "pip install mypy"),
        (TestGate(env=empty_path), "pip install pytest"),
    )
    for gate, hint in cases:
        result = gate.check(GateContext(working_dir=str(tmp_path)))
        assert not result.passed and hint in result.message, result.message


def test_missing_tool_skips_only_when_told(tmp_path: Path) -> None:
    result = CommandGate([MISSING], skip_if_missing=True).check(GateContext(working_dir=str(tmp_path)))
    assert result.passed and result.severity is Severity.INFO
    assert result.details["skipped"] is True and MISSING in result.message


def test_timeout_fails_naming_it_and_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('waiting', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = python(code, timeout=1.0).check(GateContext(working_dir=str(tmp_path)))
    assert time.monotonic() - started < 20
    assert not result.passed and result.details["timed_out"] is True
    assert "timed out after 1s" in result.message and result.details["timeout_seconds"] == 1.0
    assert "waiting" in result.details["output_tail"]
    grandchild = int(pid_file.read_text(encoding="utf-8"))
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the tool's own child outlived the timeout"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of an exited parent may linger as a zombie until reaped by init.
    try:
        return Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_test_gate_runs_real_pytest_on_files() -> None:
    gate = TestGate([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], timeout=60,
                    env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})  # plugins only slow the child down
    passing = gate.check(GateContext(files={"test_ok.py": "def test_ok():\n    assert 1 + 1 == 2\n"}))
    assert passing.passed and "1 passed" in passing.details["output_tail"]
    failing = gate.check(GateContext(files={"test_bad.py": "def test_bad():\n    assert 1 + 1 == 3\n"}))
    assert not failing.passed and "1 failed" in failing.details["output_tail"]


def test_defaults_and_configuration_errors() -> None:
    assert (LintGate().command, TypeCheckGate().command, TestGate().command) == (
        ["ruff", "check"], ["mypy", "."], ["pytest", "-q"])
    assert (LintGate().name, TypeCheckGate().name, TestGate().name) == ("lint", "typecheck", "tests")
    assert LintGate(severity="warning", name="ruff").severity is Severity.WARNING
    with pytest.raises(ConfigurationError, match="list of strings"):
        CommandGate("ruff check")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="list of strings"):
        CommandGate([])
    with pytest.raises(ConfigurationError, match="timeout must be > 0"):
        LintGate(timeout=0)


#: The venv's own ruff and mypy (dev dependencies), found the way the gates find tools: on PATH.
VENV_TOOLS = {"PATH": str(Path(PY).parent)}


@pytest.mark.parametrize(
    ("gate", "bad", "complaint"),
    [
        (LintGate(env=VENV_TOOLS), "import os\n", "F401"),
        (TypeCheckGate(["mypy", "--no-incremental", "."], env=VENV_TOOLS), "x: int = 'one'\n", "Incompatible types"),
    ],
    ids=["ruff", "mypy"],
)
def test_the_default_tools_really_run_and_judge_the_code(gate: CommandGate, bad: str, complaint: str) -> None:
    good = gate.check(GateContext(files={"mod.py": "x: int = 1\n"}))
    assert good.passed, good.details
    result = gate.check(GateContext(files={"mod.py": bad}))
    assert not result.passed and result.details["exit_code"] != 0
    assert complaint in result.details["output_tail"]
