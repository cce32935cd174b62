"""Drive real ``loopbot`` processes on a temp state dir.

``Bot`` starts ``loopbot serve`` with port 0 and waits until the serve lock
names the bound port and /healthz answers; ``cli`` runs one command to
completion. Everything waits on a condition with a deadline, never a bare sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.serve_lock import ServeLock

from ..runtime_support import state_fingerprint, wait_for

__all__ = ["Workspace", "Bot", "demo_loop", "slow_loop", "wait_for"]

#: The repository root, on PYTHONPATH so a config can name ``factory: tests.bot.slow_loop:build``.
REPO = Path(__file__).resolve().parents[3]
LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT[0]).exists():  # not installed as a script: run the module
    LOOPBOT = [sys.executable, "-m", "bot.cli"]


def demo_loop(name: str = "demo", **extra: Any) -> dict[str, Any]:
    reviewers = {"local": ["alice", "bob", "carol"]}
    loop: dict[str, Any] = {"name": name, "pattern": "demo", "review": {"reviewers": reviewers}}
    for key, value in extra.items():
        if key == "review":
            loop["review"].update(value)
        else:
            loop[key] = value
    return loop


def slow_loop(trail: Path, **options: Any) -> dict[str, Any]:
    """A loop of slow steps (tests/bot/slow_loop.py) that appends start/done lines to ``trail``."""
    return {
        "name": "slow", "factory": "tests.bot.slow_loop:build", "run_on_start": True,
        "options": {"trail": str(trail), **options},
    }


class Workspace:
    """A config file plus its state dir, and helpers to run loopbot against them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_dir = root / "state"
        self.config_path = root / "config.yaml"
        self.env = {
            **os.environ, "LOOPBOT_CONFIG": str(self.config_path), "LOOPBOT_USER": "alice", "PYTHONPATH": str(REPO),
        }
        self.env.pop("PORT", None)
        self.bots: list[Bot] = []
        self.store: dict[str, Any] | None = None  # a config ``store`` block (PostgreSQL); None: SQLite in state_dir

    def write_config(self, loops: list[dict[str, Any]], **top: Any) -> None:
        config = {
            "state_dir": str(self.state_dir),
            "server": {"port": 0, "host": "127.0.0.1"},
            "scheduler": {"poll_interval": 0.1},
            "loops": loops,
            **({} if self.store is None else {"store": self.store}),
            **top,
        }
        self.config_path.write_text(yaml.safe_dump(config), encoding="utf-8")

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*LOOPBOT, *args], env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=60,
            cwd=self.root,
        )

    def status(self, *, everything: bool = False) -> dict[str, Any]:
        """``status --json``: the hot set and the latest ended runs, or ``everything`` ever stored (``--all``)."""
        done = self.cli("status", "--json", *(["--all"] if everything else []))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def run(self, run_id: str) -> dict[str, Any] | None:
        return next((r for r in self.status()["runs"] if r["id"] == run_id), None)

    def review(self, review_id: str) -> dict[str, Any] | None:
        return next((r for r in self.status()["reviews"] if r["id"] == review_id), None)

    def wait_run(self, run_id: str, status: str, timeout: float = 15.0) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            run = self.run(run_id)
            return run if run and run["status"] == status else None

        return wait_for(reached, timeout=timeout, what=f"run {run_id} to be {status}")

    def wait_open_review(self, loop: str = "demo", timeout: float = 15.0) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((r for r in self.status()["reviews"] if r["loop"] == loop and r["status"] == "open"), None)

        return wait_for(found, timeout=timeout, what=f"an open review of loop {loop}")

    def fingerprint(self) -> dict[str, str]:
        """Every file under the state dir (except the health probe) by hash, and the database by content."""
        return state_fingerprint(self.state_dir)

    def serve(self) -> Bot:
        bot = Bot(self)
        self.bots.append(bot)
        bot.start()
        return bot


class Bot:
    """One ``loopbot serve`` subprocess."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None
        self.log_path = workspace.root / f"serve-{len(workspace.bots)}.log"

    def start(self) -> None:
        with open(self.log_path, "w", encoding="utf-8") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [*LOOPBOT, "serve"], env=self.ws.env, stdout=log, stderr=subprocess.STDOUT, text=True,
                cwd=self.ws.root,
            )
        self.port = wait_for(self._bound_port, timeout=20, what=f"serve to bind a port (log: {self.log()})")
        wait_for(self._healthy, timeout=10, what="/healthz to answer 200")

    def _bound_port(self) -> int | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited with {self.proc.returncode}:\n{self.log()}")
        info = ServeLock.holder(self.ws.state_dir)
        if info and info.get("pid") == self.proc.pid and info.get("port"):
            return int(info["port"])
        return None

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def healthz(self) -> httpx.Response:
        return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(tmp_path)
    try:
        yield workspace
    finally:
        for bot in workspace.bots:
            bot.close()
