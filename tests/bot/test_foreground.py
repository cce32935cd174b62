"""`loopbot run` in the foreground: Ctrl-C and SIGTERM stop the run at a step boundary, saved for serve."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import EXIT_OK, main
from bot.foreground import StopOnSignal
from bot.store import SqliteStore

from .runtime_support import wait_for, write_config
from .slow_loop import trail_lines

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_leftover_log_handlers() -> Iterator[None]:
    """An in-process `run` sets up logging: take its handler away again."""
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_loopbot", False)]:
        root.removeHandler(handler)


class StopCounter:
    """Stands in for the runner: counts stop requests."""

    def __init__(self) -> None:
        self.stops = 0

    def request_stop(self) -> None:
        self.stops += 1


def test_the_first_signal_asks_for_a_stop_and_a_second_ctrl_c_aborts(capfd: pytest.CaptureFixture[str]) -> None:
    runner = StopCounter()
    handler = StopOnSignal(runner)  # type: ignore[arg-type]
    handler(signal.SIGTERM, None)
    assert (runner.stops, handler.signum) == (1, signal.SIGTERM)
    assert "stopping after the current step (Ctrl-C again to abort now)" in capfd.readouterr().err
    handler(signal.SIGTERM, None)  # already stopping: a repeated SIGTERM changes nothing
    assert (runner.stops, handler.signum) == (1, signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        handler(signal.SIGINT, None)


def test_the_handlers_are_in_place_only_during_the_run() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with StopOnSignal(StopCounter()) as stop:  # type: ignore[arg-type]
        assert signal.getsignal(signal.SIGINT) is stop and signal.getsignal(signal.SIGTERM) is stop
    assert {sig: signal.getsignal(sig) for sig in before} == before


# -- real processes, real signals -------------------------------------------------------------------


class ForegroundRun:
    """`python -m bot.cli run slow` on a loop of three steps, its output in files.

    Each step, once started, holds until ``open_gate()``: a signal lands mid-step however slow the machine.
    """

    def __init__(self, root: Path) -> None:
        self.trail, self.gate = root / "trail", root / "gate"
        loop = {"name": "slow", "factory": "tests.bot.slow_loop:build",
                "options": {"trail": str(self.trail), "steps": 3, "delay": 0, "gate": str(self.gate)}}
        self.config = write_config(root, [loop])
        self.out, self.err = root / "stdout", root / "stderr"
        env = {**os.environ, "PYTHONPATH": str(REPO), "LOOPBOT_USER": "alice"}
        env.pop("LOOPBOT_CONFIG", None)
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "--config", str(self.config), "run", "slow"],
                stdout=out, stderr=err, env=env, cwd=root,
            )

    def wait_for_output(self, text: str) -> None:
        wait_for(lambda: text in self.err.read_text(), what=f"{text!r} on stderr")

    def wait_for_step(self, marker: str) -> None:
        wait_for(lambda: any(line.startswith(marker) for line in trail_lines(self.trail)), what=marker)

    def open_gate(self) -> None:
        self.gate.touch()

    def finish(self) -> tuple[int, str, str]:
        try:
            code = self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        return code, self.out.read_text(), self.err.read_text()


@pytest.fixture
def foreground(tmp_path: Path) -> ForegroundRun:
    return ForegroundRun(tmp_path)


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_run_after_its_step_saved_and_the_next_run_continues_it(
    foreground: ForegroundRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], sig: signal.Signals
) -> None:
    foreground.wait_for_step("start step_1")
    foreground.process.send_signal(sig)
    foreground.wait_for_output("stopping after the current step")
    foreground.open_gate()  # the step under way ends after the signal was taken
    code, out, err = foreground.finish()
    assert code == 128 + sig  # 130 for Ctrl-C, 143 for SIGTERM
    assert "interrupted: run slow-run-1 is saved after step 1 of 3; `loopbot serve` continues it" in out
    assert "Traceback" not in err
    assert [line.split()[:2] for line in trail_lines(foreground.trail)] == [["start", "step_1"], ["done", "step_1"]]
    assert SqliteStore(tmp_path / "state").get_run("slow-run-1").status == "running"  # resumable, not failed

    # no server needed to move on: the next foreground run continues slow-run-1 from its saved step first
    assert main(["--config", str(foreground.config), "run", "slow"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("run slow-run-1: completed\n")
    assert "run slow-run-2: completed" in out
    steps = [line.split()[:2] for line in trail_lines(foreground.trail)]
    assert steps[:6] == [["start", "step_1"], ["done", "step_1"], ["start", "step_2"], ["done", "step_2"],
                         ["start", "step_3"], ["done", "step_3"]]  # step 1 was not run again


@pytest.mark.e2e
def test_a_second_ctrl_c_aborts_the_step_without_a_traceback(foreground: ForegroundRun, tmp_path: Path) -> None:
    foreground.wait_for_step("start step_1")
    foreground.process.send_signal(signal.SIGINT)
    foreground.wait_for_output("Ctrl-C again to abort now")
    foreground.process.send_signal(signal.SIGINT)
    code, out, err = foreground.finish()
    assert code == 130
    assert "aborted: run slow-run-1 stopped mid-step; `loopbot serve` continues it from its last saved step" in err
    assert "Traceback" not in err
    assert [line.split()[:2] for line in trail_lines(foreground.trail)] == [["start", "step_1"]]  # cut short
    assert SqliteStore(tmp_path / "state").get_run("slow-run-1").status == "running"
