"""The ``loopbot`` command: serve, run, status, decide, check.

``run`` and ``decide`` work with or without a server: ``run`` hands the run
to a live ``serve`` (through the store's inbox) or runs in the foreground
until the run completes or pauses; ``decide`` only records a vote - the lock
holder applies decided reviews (within a second when serving, else at the
next start).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from adapters.commands import CommandError, decision_from_word, parse_assignments

from bot.config import BotConfig, ConfigError, load_config
from bot.logging import RedactingFilter, setup_logging
from bot.reviews import Vote, cast_vote
from bot.status import render_json, render_table
from bot.store import AlreadyRunningError, FileStore, ServeLock, StoreError, UnknownReviewError

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_LOCKED"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3

EPILOG = """\
exit codes:
  0  done (run: completed, paused for review, or handed to the server)
  1  failed: invalid config, a vote refused, a run that failed or was rejected, an unusable store
  2  usage: unknown command, loop, review id or decision word
  3  serve: another loopbot serve holds this state_dir (the message names its pid)

config: --config PATH, else $LOOPBOT_CONFIG, else config.yaml
"""


def _config_option(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--config", metavar="PATH", default=default,
        help="config file (default: $LOOPBOT_CONFIG, else config.yaml)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopbot", description="Run agent loops on a schedule; a person decides at every checkpoint.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _config_option(parser, None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Subcommands accept --config too; SUPPRESS keeps a top-level one when they don't repeat it.
    common = argparse.ArgumentParser(add_help=False)
    _config_option(common, argparse.SUPPRESS)

    commands.add_parser("serve", parents=[common], help="HTTP server + scheduler + channels")
    run = commands.add_parser("run", parents=[common], help="start a run of LOOP now")
    run.add_argument("loop", metavar="LOOP")
    status = commands.add_parser("status", parents=[common], help="runs and open reviews")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    decide = commands.add_parser("decide", parents=[common], help="vote on a review")
    decide.add_argument("review", metavar="REVIEW")
    decide.add_argument("decision", metavar="DECISION", help="approve | reject | retry | modify | pause")
    decide.add_argument("--feedback", default="", metavar="TEXT", help="note; a reject needs a reason")
    decide.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                        help="a modification (repeatable); values are JSON when they parse")
    decide.add_argument("--as", dest="voter", metavar="NAME",
                        help="who is voting (default: $LOOPBOT_USER, else $USER, else the login name)")
    commands.add_parser("check", parents=[common], help="validate the config")
    return parser


def _config_path(args: argparse.Namespace) -> Path:
    return Path(args.config or os.environ.get("LOOPBOT_CONFIG") or "config.yaml")


def _decide_command(path: Path) -> str:
    """The decide line the server prints must work when pasted, so it names a non-default config."""
    if str(path) == "config.yaml" or os.environ.get("LOOPBOT_CONFIG") == str(path):
        return "loopbot decide"
    return f"loopbot --config {path} decide"


def _err(message: str) -> None:
    print(f"loopbot: {message}", file=sys.stderr)


def _secrets(config: BotConfig) -> list[str]:
    return list(config.secret_values())


# -- commands ------------------------------------------------------------------


def cmd_check(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    print(f"OK: {path} is valid")
    print(config.summary())
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.server import serve  # uvicorn and the scheduler load only for serve

    setup_logging(secrets=_secrets(config))
    try:
        return serve(config, decide_command=_decide_command(path))
    except AlreadyRunningError as err:
        _err(str(err))
        return EXIT_LOCKED
    except OSError as err:  # the port is taken, or the state dir cannot be created
        _err(f"cannot serve on {config.server.host}:{config.server.port} with state_dir {config.state_dir}: {err}")
        return EXIT_FAILED


def cmd_run(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.posting import ReviewDesk, local_channel
    from bot.runner import Runner
    from bot.worker import LoopCatalog, UnknownLoopError

    catalog = LoopCatalog(config)
    try:
        catalog.loop_config(args.loop)
    except UnknownLoopError as err:
        _err(str(err))
        return EXIT_USAGE
    state_dir = Path(config.state_dir)
    store = FileStore(state_dir)
    lock = ServeLock(state_dir)
    try:
        lock.acquire()
    except AlreadyRunningError as err:
        request_id = store.enqueue_request("run", {"loop": args.loop, "trigger": "cli"})
        print(f"handed to the running server (pid {err.pid}): request {request_id}")
        return EXIT_OK
    try:
        setup_logging(secrets=_secrets(config))
        local = local_channel(state_dir, _decide_command(path))
        runner = Runner(config, store, ReviewDesk({"local": local}), catalog=catalog)
        run = runner.run_foreground(args.loop)
    finally:
        lock.release()
    if run is None:
        print(f"not started: loop {args.loop} already has an active run (see `loopbot status`)")
        return EXIT_OK
    print(f"run {run.id}: {run.status}" + (f" - {run.reason}" if run.reason else ""))
    if run.status == "waiting" and run.review_id:
        print(f"review {run.review_id}: {local.path_for(run.review_id)}")
        print(f"approve with: {_decide_command(path)} {run.review_id} approve")
        print("then start `loopbot serve` (or leave it running) to resume the run")
    return EXIT_OK if run.status in ("completed", "waiting") else EXIT_FAILED


def cmd_status(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    store = FileStore(config.state_dir)
    runs, reviews = store.list_runs(), store.list_reviews()
    text = render_json(runs, reviews) if args.json else render_table(runs, reviews, _decide_command(path))
    print(RedactingFilter(_secrets(config)).redact(text))
    return EXIT_OK


def _login_name_as_user() -> None:
    """Give $USER the login name where the environment lacks it (containers, cron, systemd).

    The example config names ``${USER}`` as its reviewer and ``decide`` votes as
    $USER: both must see the same name, or the config says "you" while the vote
    comes from "root" and is refused.
    """
    if not os.environ.get("USER"):
        # with no login name at all, --as or $LOOPBOT_USER must say who votes
        with contextlib.suppress(KeyError, OSError):
            os.environ["USER"] = getpass.getuser()


def _voter_name(args: argparse.Namespace) -> str | None:
    """--as, else $LOOPBOT_USER, else $USER (what the example config names)."""
    return args.voter or os.environ.get("LOOPBOT_USER") or os.environ.get("USER")


def cmd_decide(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.runner import utcnow

    try:
        decision = decision_from_word(args.decision)
        modifications = parse_assignments(args.assignments)
    except CommandError as err:
        _err(f"{err}\nusage: loopbot decide REVIEW DECISION [--feedback TEXT] [--set KEY=VALUE ...] [--as NAME]")
        return EXIT_USAGE
    store = FileStore(config.state_dir)
    try:
        store.get_review(args.review)
    except UnknownReviewError as err:
        _err(str(err))
        return EXIT_USAGE
    voter = _voter_name(args)
    if not voter:
        _err("cannot tell who is voting: pass --as NAME or set LOOPBOT_USER")
        return EXIT_USAGE
    now = utcnow()
    vote = Vote(voter=f"local:{voter}", decision=decision, feedback=args.feedback,
                modifications=modifications, at=now, source="local")
    result = store.update_review(args.review, lambda review: cast_vote(review, vote, now=now))
    if not result.accepted:
        _err(result.message)
        return EXIT_FAILED
    print(result.message)
    if result.outcome is not None:
        holder = ServeLock.holder(config.state_dir)
        if holder:
            print(f"the running server (pid {holder.get('pid')}) resumes the run within a second")
        else:
            print("no server is running: the run resumes when `loopbot serve` starts")
    return EXIT_OK


COMMANDS = {"check": cmd_check, "serve": cmd_serve, "run": cmd_run, "status": cmd_status, "decide": cmd_decide}


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _login_name_as_user()
    path = _config_path(args)
    try:
        config = load_config(path)
    except ConfigError as err:
        _err(f"invalid config:\n{err}")
        return EXIT_FAILED
    try:
        return COMMANDS[args.command](args, config, path)
    except StoreError as err:
        _err(f"the store in {config.state_dir} is unusable: {err}")
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover - `python -m bot.cli`
    sys.exit(main())
