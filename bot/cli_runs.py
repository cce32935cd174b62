"""The ``loopbot`` commands that move runs: ``run``, ``apply`` and ``cancel``.

Each takes the state dir's lock for a foreground runner, or hands its work
to the ``loopbot serve`` that holds it (through the store's inbox); a
foreground run stopped by a signal is saved and exits 128 + its number.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli_common import (
    EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_SIGNAL_BASE, EXIT_USAGE, decide_command, print_error, secret_values,
    voter_name,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from adapters.local import LocalChannel
    from bot.config import BotConfig
    from bot.runner import Runner
    from bot.store import Store

__all__ = ["cmd_apply", "cmd_cancel", "cmd_run"]


def _approve_lines(store: Store, review_id: str, decide_line: str) -> list[str]:
    """"approve with: LINE" for whoever runs it (``--as`` when $USER is not a local reviewer), then who may answer.

    Worded as the review file and `status` word it (``adapters.local.answer_as``); the note is a line of
    its own, so the decide line pastes whole.
    """
    from adapters.local_answers import answer_as, answer_lines
    from bot.review_voters import authorize
    from bot.status import where_to_answer

    review = store.get_review(review_id)
    elsewhere = where_to_answer(review)
    if elsewhere is not None:  # no decide line that the vote path would refuse
        return [elsewhere]
    reviewers = review.policy.reviewers
    voter = voter_name(None)
    if reviewers.anyone or (voter is not None and authorize(reviewers, f"local:{voter}") is None):
        return [f"approve with: {answer_lines(review_id, decide_line)[0]}"]
    as_option, who = answer_as(reviewers.local)
    line = f"approve with: {answer_lines(review_id, decide_line, as_option)[0]}"
    return [line, f"  ({who})"] if who else [line]


def _run_here(runner: Runner, store: Store, local: LocalChannel, loop: str, path: Path) -> int:
    """The foreground run itself, under the state dir's lock: report where it ended."""
    from bot.foreground import StopOnSignal, active_run_help
    from bot.run_summary import saved_progress

    with StopOnSignal(runner) as stop:
        try:
            _catch_up(runner, store)
            run = runner.run_foreground(loop)
        except KeyboardInterrupt:
            active = runner.active_run(loop)
            named = f"run {active.id}" if active else "the run"
            print_error(f"aborted: {named} stopped mid-step; `loopbot serve` continues it from its last saved step")
            return EXIT_SIGNAL_BASE + signal.SIGINT
    if run is None:  # the loop's slot is taken; we hold the state dir, so nothing else moves that run
        active = runner.active_run(loop)
        assert active is not None
        for line in active_run_help(active, store, local, decide_command(path)):
            print_error(line)
        return EXIT_FAILED
    if run.status == "running" and stop.signum is not None:
        progress = saved_progress(store.load_snapshot(run.id))
        print(f"interrupted: run {run.id} is saved {progress}; `loopbot serve` continues it")
        return EXIT_SIGNAL_BASE + stop.signum
    print(f"run {run.id}: {run.status}" + (f" - {run.reason}" if run.reason else ""))
    if run.status == "waiting" and run.review_id:
        print(f"review {run.review_id}: {local.path_for(run.review_id)}")
        for line in _approve_lines(store, run.review_id, decide_command(path)):
            print(line)
        print("once it is decided, `loopbot apply` (or `loopbot run` again, or `loopbot serve`) resumes the run")
    return EXIT_OK if run.status in ("completed", "waiting") else EXIT_FAILED


def cmd_run(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.serve_lock import AlreadyRunningError, ServeLock
    from bot.store.open import open_store
    from bot.serve_lock import ROLE_RUN, ROLE_SERVE
    from bot.loop_catalog import LoopCatalog, UnknownLoopError

    catalog = LoopCatalog(config)
    try:
        catalog.loop_config(args.loop)
    except UnknownLoopError as err:
        print_error(str(err))
        return EXIT_USAGE
    state_dir = Path(config.state_dir)
    store = open_store(config)
    lock = ServeLock(state_dir)
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role != ROLE_SERVE:  # only a server reads the inbox: a request left here would start a run later
            print_error(str(err))
            return EXIT_LOCKED
        from bot.foreground import busy_help

        busy = busy_help(store, catalog.loop_config(args.loop), err.pid, decide_command(path))
        if busy:  # the server would only log that it skipped the request
            for line in busy:
                print_error(line)
            return EXIT_FAILED
        request_id = store.enqueue_request("run", {"loop": args.loop, "trigger": "cli"})
        print(f"handed to the running server (pid {err.pid}): request {request_id}")
        return EXIT_OK
    try:
        runner, store, local = _foreground(config, path, store)
        return _run_here(runner, store, local, args.loop, path)
    finally:
        lock.release()


def _catch_up(runner: Runner, store: Store) -> list[str]:
    """Decided reviews applied and interrupted runs continued here; one line for each run moved."""
    moved = runner.catch_up()
    for run_id in moved:
        run = store.get_run(run_id)
        print(f"run {run.id}: {run.status}" + (f" - {run.reason}" if run.reason else "")
              + (f" (review {run.review_id})" if run.status == "waiting" and run.review_id else ""))
    return moved


def _foreground(config: BotConfig, path: Path, store: Store | None = None) -> tuple[Runner, Store, LocalChannel]:
    """A runner for this process, posting to the local channel inline (a post that fails waits for `serve`)."""
    from bot.desk import ReviewDesk, local_channel
    from bot.logging import setup_logging
    from bot.runner import Runner, utcnow
    from bot.store.open import open_store

    setup_logging(secrets=secret_values(config), format=config.logging.format)
    store = store if store is not None else open_store(config)
    local = local_channel(Path(config.state_dir), decide_command(path))
    desk = ReviewDesk(store, {"local": local}, clock=utcnow, inline=True)
    return Runner(config, store, desk), store, local


def cmd_apply(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.foreground import StopOnSignal
    from bot.serve_lock import ROLE_RUN, ROLE_SERVE, AlreadyRunningError, ServeLock

    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role == ROLE_SERVE:
            print(f"the running server (pid {err.pid}) applies decided reviews within a second; nothing to do here")
            return EXIT_OK
        print_error(str(err))
        return EXIT_LOCKED
    try:
        runner, store, _local = _foreground(config, path)
        with StopOnSignal(runner) as stop:
            moved = _catch_up(runner, store)
        if not moved:
            print("nothing to apply: no decided review and no interrupted run")
        if stop.signum is not None:
            return EXIT_SIGNAL_BASE + stop.signum
        failed = [r for r in moved if store.get_run(r).status in ("failed", "rejected")]
        return EXIT_FAILED if failed else EXIT_OK
    finally:
        lock.release()


def cmd_cancel(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.desk import Authorizer, ListMembership, People
    from bot.store import UnknownRunError
    from bot.serve_lock import ROLE_RUN, ROLE_SERVE, AlreadyRunningError, ServeLock
    from bot.store.open import open_store
    from bot.loop_catalog import LoopCatalog, UnknownLoopError

    voter = voter_name(args.voter)
    if not voter:
        print_error("cannot tell who cancels: pass --as NAME or set LOOPBOT_USER")
        return EXIT_USAGE
    store = open_store(config)
    try:
        run = store.get_run(args.run)
    except UnknownRunError as err:
        print_error(str(err))
        return EXIT_USAGE
    try:
        operators = LoopCatalog(config).loop_config(run.loop).operator_policy()
    except UnknownLoopError:  # the loop left the config: whoever may use this state dir may end its runs
        operators = None
    if operators is not None:
        refusal = Authorizer({"local": ListMembership("local")}, People.from_config(config.people)).refusal(
            operators, f"local:{voter}")
        if refusal is not None:
            print_error(f"cancel refused: {refusal} (the operators of loop {run.loop} may cancel its runs)")
            return EXIT_FAILED
    if run.status not in ("running", "waiting"):
        print_error(f"run {run.id} has already ended ({run.status}); there is nothing to cancel")
        return EXIT_FAILED
    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role != ROLE_SERVE:
            print_error(f"{err}; stop that foreground run (Ctrl-C), then cancel {run.id}")
            return EXIT_LOCKED
        store.enqueue_request("cancel", {"run": run.id, "by": f"local:{voter}", "reason": args.reason})
        print(f"handed to the running server (pid {err.pid}): run {run.id} is cancelled at its next tick")
        return EXIT_OK
    try:
        runner, _store, _local = _foreground(config, path)
        try:
            print(runner.cancel(run.id, f"local:{voter}", args.reason))
        except ValueError as err:
            print_error(str(err))
            return EXIT_FAILED
        return EXIT_OK
    finally:
        lock.release()
