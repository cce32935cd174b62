"""A `loopbot run` without a server: how it stops on a signal, and what it says when it cannot start.

The run itself is the runner's (``Runner.run_foreground``); this is the
part a person at the terminal meets: Ctrl-C stops the run the way serve's
SIGTERM does, and a refused run names what holds the loop and what to do.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

from adapters.local import LocalChannel

from bot.config import LoopBlock
from bot.runner import Runner, active_run
from bot.store.base import ReviewStore, RunRecord, RunStore

__all__ = ["StopOnSignal", "active_run_help", "busy_help"]


class StopOnSignal:
    """SIGINT/SIGTERM during a foreground run: stop at the next step boundary, saved - as serve does.

    The runner's engine stops right after its next save, so the run stays
    resumable; a second Ctrl-C aborts at once (KeyboardInterrupt), and the run
    then continues from its last snapshot when `loopbot serve` starts.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._previous: dict[int, Any] = {}
        self.signum: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        self.signum = signum
        self._runner.request_stop()
        # os.write, not print: a handler may run while the main thread is inside a print
        os.write(2, b"loopbot: stopping after the current step (Ctrl-C again to abort now)\n")

    def __enter__(self) -> StopOnSignal:
        self._previous = {sig: signal.signal(sig, self) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def active_run_help(active: RunRecord, store: ReviewStore, local: LocalChannel, decide_command: str) -> list[str]:
    """Why `run` started nothing, and what would move the loop's ``active`` run on.

    Called while this process holds the state dir: no server or other run is
    alive, so a "running" run is one that was interrupted.
    """
    loop = active.loop
    head = f"not started: loop {loop} already has an active run: {active.id} is {active.status}"
    review = store.get_review(active.review_id) if active.review_id else None
    if review is not None and review.status == "open":
        return [
            f"{head} on review {review.id} ({local.path_for(review.id)})",
            f"approve with: {decide_command} {review.id} approve",
            "then `loopbot apply` (or `loopbot serve`) resumes it",
        ]
    if review is not None and review.status == "decided":
        return [f"{head}; review {review.id} is decided: start `loopbot serve` to apply it"]
    if active.status == "running":
        return [head, f"run {active.id} was interrupted; start `loopbot serve` to continue it"]
    return [head]


def busy_help(store: RunStore, loop: LoopBlock, server_pid: object, decide_command: str) -> list[str]:
    """Why a running server would skip a run of ``loop`` now (its one slot is taken), else [].

    Said before handing the run over: the server itself would only log the skip.
    """
    if loop.overlap == "allow":
        return []
    active = active_run(store, loop.name)
    if active is None:
        return []
    head = f"not started: loop {loop.name} already has an active run: {active.id} is {active.status}"
    if active.status == "waiting" and active.review_id:
        return [f"{head} on review {active.review_id}", f"approve with: {decide_command} {active.review_id} approve"]
    return [f"{head} in the running server (pid {server_pid})"]
