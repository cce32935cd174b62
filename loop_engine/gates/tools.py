"""Do the project's own tools accept the output? Lint, type check and tests as subprocesses.

A ``CommandGate`` runs one command (no shell) in ``context.working_dir``, or,
when ``context.files`` is given, in a fresh temp dir holding those files
(files win over ``working_dir``: they are the output under test). Exit code 0
passes; the tail of the combined stdout/stderr goes into ``details``.

A missing executable is a *failure* that names the tool and how to install
it - a gate that passes because its tool is absent checks nothing. Only with
``skip_if_missing=True`` does it become a skip (passed, severity info,
``details["skipped"] = True``). A run longer than ``timeout`` is killed
(with its whole process group) and fails, naming the timeout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigurationError
from .base import DeterministicGate, GateContext, GateResult, Severity

__all__ = ["INSTALL_HINTS", "CommandGate", "LintGate", "TestGate", "TypeCheckGate"]

#: executable name -> how to get it, quoted in the missing-tool message.
INSTALL_HINTS: dict[str, str] = {
    "ruff": "pip install ruff",
    "mypy": "pip install mypy",
    "pytest": "pip install pytest",
}

#: After a kill, how long to wait for the pipes to drain before giving up on them.
_DRAIN_SECONDS = 5.0


def _safe_relative(path: str) -> PurePosixPath | None:
    """The path if it stays inside the temp dir, else None (absolute paths, ``..``)."""
    pure = PurePosixPath(path.replace("\\", "/"))
    if not path or pure.is_absolute() or ".." in pure.parts or pure == PurePosixPath("."):
        return None
    return pure


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(process.pid, signal.SIGKILL)


class CommandGate(DeterministicGate):
    """Runs ``command`` and passes when it exits 0."""

    name = "command"

    def __init__(
        self,
        command: Sequence[str],
        *,
        timeout: float = 120.0,
        skip_if_missing: bool = False,
        env: Mapping[str, str] | None = None,
        tail_chars: int = 4000,
        install_hint: str | None = None,
        name: str | None = None,
        severity: str | Severity | None = None,
    ) -> None:
        super().__init__(name=name, severity=severity)
        if isinstance(command, str) or not command or not all(isinstance(part, str) for part in command):
            raise ConfigurationError(
                f"{type(self).__name__} needs the command as a non-empty list of strings "
                f"(e.g. ['ruff', 'check']), got {command!r}; no shell is used, so split it yourself"
            )
        if not timeout > 0:
            raise ConfigurationError(f"{type(self).__name__} timeout must be > 0 seconds, got {timeout!r}")
        self.command = list(command)
        self.timeout = float(timeout)
        self.skip_if_missing = skip_if_missing
        self.env = dict(env or {})
        self.tail_chars = tail_chars
        self.tool = Path(self.command[0]).name
        self.install_hint = install_hint or INSTALL_HINTS.get(self.tool, f"install {self.tool} or put it on PATH")

    def check(self, context: GateContext) -> GateResult:
        environment = {**os.environ, **self.env}
        executable = shutil.which(self.command[0], path=environment.get("PATH"))
        if executable is None:
            return self._missing()
        argv = [executable, *self.command[1:]]
        files = context.files
        if files:
            if not isinstance(files, dict):
                return self.result(False, f"context.files must be a dict of path -> text, got {type(files).__name__}")
            with tempfile.TemporaryDirectory(prefix="loopbot-gate-") as tmp:
                problem = self._write_files(Path(tmp), files)
                if problem:
                    return self.result(False, problem, command=self.command)
                return self._run(argv, tmp, environment, "<temp dir with context.files>")
        if context.working_dir is None:
            return self.result(
                False, "nothing to run on: set context.working_dir or context.files", command=self.command
            )
        if not Path(context.working_dir).is_dir():
            return self.result(
                False, f"working_dir {context.working_dir!r} is not a directory", command=self.command
            )
        cwd = str(context.working_dir)
        return self._run(argv, cwd, environment, cwd)

    def _missing(self) -> GateResult:
        tool = self.command[0]
        if self.skip_if_missing:
            return GateResult(
                passed=True,
                gate_name=self.name,
                message=f"skipped: {tool!r} is not installed",
                details={"skipped": True, "command": self.command, "missing": tool},
                severity=Severity.INFO,
            )
        return self.result(
            False,
            f"{tool!r} is not installed or not on PATH; {self.install_hint}, "
            f"or create the gate with skip_if_missing=True to skip it when the tool is absent",
            command=self.command,
            missing=tool,
            skipped=False,
        )

    @staticmethod
    def _write_files(root: Path, files: dict[Any, Any]) -> str | None:
        """Write every file under ``root``; a message for the first one that cannot be."""
        for raw_path, text in sorted(files.items(), key=lambda item: str(item[0])):
            relative = _safe_relative(str(raw_path))
            if relative is None:
                return f"refusing file path {raw_path!r}: paths must be relative and stay inside the project"
            if not isinstance(text, (str, bytes)):
                return f"file {raw_path!r} must be text, got {type(text).__name__}"
            target = root.joinpath(*relative.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            # Scratch copies for one tool run: a torn file here loses nothing, so no atomic write.
            if isinstance(text, bytes):
                target.write_bytes(text)
            else:
                target.write_text(text, encoding="utf-8")
        return None

    def _run(self, argv: list[str], cwd: str, environment: dict[str, str], shown_cwd: str) -> GateResult:
        try:
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # so a timeout can kill the tool's children too
            )
        except (FileNotFoundError, PermissionError) as exc:  # raced away, or not executable
            return self.result(
                False, f"cannot start {self.tool!r}: {exc}; {self.install_hint}", command=self.command, skipped=False
            )
        try:
            output, _ = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            try:
                output, _ = process.communicate(timeout=_DRAIN_SECONDS)
            except subprocess.TimeoutExpired:  # a grandchild left its own group and holds the pipe
                process.kill()
                output = ""
            return self.result(
                False,
                f"{self.tool!r} timed out after {self.timeout:g}s and was killed; "
                "raise the gate's timeout if the tool needs longer",
                command=self.command,
                cwd=shown_cwd,
                timeout_seconds=self.timeout,
                timed_out=True,
                output_tail=_tail(output or "", self.tail_chars),
            )
        code = process.returncode
        details = {
            "command": self.command,
            "cwd": shown_cwd,
            "exit_code": code,
            "output_tail": _tail(output, self.tail_chars),
        }
        if code == 0:
            return self.result(True, f"{self.tool!r} passed", **details)
        return self.result(False, f"{self.tool!r} failed with exit code {code}; see output_tail", **details)


class LintGate(CommandGate):
    """``ruff check`` by default."""

    name = "lint"

    def __init__(self, command: Sequence[str] = ("ruff", "check"), **options: Any) -> None:
        super().__init__(command, **options)


class TypeCheckGate(CommandGate):
    """``mypy .`` by default (mypy needs a target)."""

    name = "typecheck"

    def __init__(self, command: Sequence[str] = ("mypy", "."), **options: Any) -> None:
        super().__init__(command, **options)


class TestGate(CommandGate):
    """``pytest -q`` by default; pytest's "no tests collected" (exit 5) fails, as nothing was tested."""

    name = "tests"
    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, command: Sequence[str] = ("pytest", "-q"), **options: Any) -> None:
        super().__init__(command, **options)
