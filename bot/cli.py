"""The ``loopbot`` command: serve, run, status, decide, check, init.

``run`` and ``decide`` work with or without a server: ``run`` hands the run
to a live ``serve`` (through the store's inbox) or runs in the foreground
until the run completes or pauses; ``decide`` only records a vote - the lock
holder applies decided reviews (within a second when serving; else ``apply``,
or a foreground ``run`` before it starts, applies them).

Every command imports what it needs inside its function, so ``--help``,
``status`` and ``decide`` load none of the engine, jsonschema, asyncio and
the scheduler (bench/cli_startup_bench.py). tests/bot/test_cli_imports.py
keeps ``import bot.cli`` free of them; keep module-level imports to the
standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # pragma: no cover - typing only; each command loads what it needs when it runs
    from adapters.local import LocalChannel
    from bot.config import BotConfig
    from bot.config_memo import ConfigView
    from bot.runner import Runner
    from bot.store import Store
    from loop_engine.review import HumanDecision

__all__ = [
    "main", "build_parser", "cmd_init", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_LOCKED", "EXIT_SIGNAL_BASE",
]

EXIT_OK = 0
#: How many ended runs `status` shows besides the active ones (`--all` shows every one).
RECENT_RUNS = 10
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
#: A foreground run stopped by a signal exits 128 + its number: 130 for Ctrl-C (SIGINT), 143 for SIGTERM.
EXIT_SIGNAL_BASE = 128

EPILOG = """\
exit codes:
  0  done (run: completed, paused for review, or handed to the server)
  1  failed or refused: invalid config; a vote the review refuses (not a reviewer, already decided,
     a change the run cannot make); a run that failed or was rejected; a run not started because its
     loop already has an active run; a cancel by someone not among the loop's operators, or of a run
     that has ended; an unusable store or state_dir (the message names the file:
     permission denied, disk full, read-only, a symlink, a file where a directory should be)
  2  usage - the command line is wrong by itself, and nothing is stored: unknown command, loop,
     review id or decision word; a missing or malformed argument (reject without --feedback, modify
     without --set, a --set or DURATION its decision does not take, a pause time with no zone or in
     the past); a --set value that cannot be stored (NaN, 1e999, nested deeper than 32 levels, over
     64 KiB); an argument that is not valid UTF-8
  3  serve, run, apply, cancel: another loopbot serve, or a foreground run, holds this state_dir (the message
     names its pid; run and cancel are handed to a serve, and apply leaves its work to one)
  130, 143  run: stopped by Ctrl-C (SIGINT) or SIGTERM; the run is saved and `loopbot serve` continues it

config: --config PATH, else $LOOPBOT_CONFIG, else config.yaml
  (no config yet? `loopbot init` writes the commented example to config.yaml)
"""


def _config_option(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--config", metavar="PATH", default=default,
        help="config file (default: $LOOPBOT_CONFIG, else config.yaml)",
    )


def _version() -> str:
    """The installed distribution's version; ``bot.__version__`` when loopbot runs from a source tree."""
    from importlib import metadata

    try:
        return metadata.version("loopbot")
    except metadata.PackageNotFoundError:
        import bot

        return str(getattr(bot, "__version__", "unknown"))


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked: importlib.metadata scans site-packages, which --help need not."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"loopbot {_version()}")  # stdout, as argparse's own version action prints
        parser.exit()


#: name -> (one-line help for the command list, the description its own --help starts with)
_COMMAND_TEXTS = {
    "serve": ("HTTP server + scheduler + channels",
              "Serve the bot: the HTTP server (/healthz, /slack/events, /github/webhook), the scheduler, review "
              "deadlines and reminders, and the runs handed to it. One per state_dir; SIGTERM or Ctrl-C lets "
              "the step in flight finish and saves."),
    "run": ("start a run of LOOP now",
            "Start a run of LOOP now: handed to the running `loopbot serve` if there is one, else run here in "
            "the foreground until it completes, pauses for a review or fails."),
    "status": ("runs and open reviews",
               "List runs (with each run's reason) and open reviews, with the line that answers each."),
    "decide": ("vote on a review",
               "Vote on a review, whether or not the server is running; the server applies the outcome at once "
               "when serving, else `loopbot apply` (or the next `loopbot run` or `serve`) does."),
    "check": ("validate the config",
              "Validate the config and build every loop once (this imports `factory` modules - the config's "
              "folder is searched first - and makes each loop's engine and context); errors name the file and key. "
              "With a slack: or github: block it also asks Slack (auth.test, scopes, channels) and GitHub (the "
              "token or App, each repository a loop posts to) whether they will work, unless --offline."),
    "migrate": ("create or upgrade the store's tables",
                "Create or upgrade the store's tables (state_dir/loopbot.db, or the store: block's PostgreSQL "
                "database) to this loopbot's schema version, and import a directory store left in state_dir by an "
                "older loopbot (serve does both at start too). A database migrated by a newer loopbot is refused."),
    "export": ("write everything the store keeps to a JSON file",
               "Write every run, review (with its votes), snapshot, id counter, pending request, outbox task and "
               "delivery key of the store (SQLite or PostgreSQL) to FILE, a new JSON file."),
    "import": ("copy a JSON export (or a directory store) into the store",
               "Copy every run, review (with its votes), snapshot, id counter, pending request, outbox task and "
               "delivery key of SOURCE - a file written by `loopbot export`, or the state_dir of a directory store "
               "of an older loopbot - into the store, which must hold no runs or reviews yet. Stop `loopbot serve` "
               "first."),
    "loops": ("each loop's schedule, next run and last run",
              "List each loop with its schedule in words and its time zone, the next run time and the last "
              "run's outcome with how long ago it ended."),
    "cancel": ("cancel a run",
               "Cancel RUN: a waiting run's review closes as \"cancelled by ...\", a running one stops at its next "
               "step boundary; the run ends `cancelled`. Only the loop's operators (default: its reviewers) may. "
               "Handed to the running `loopbot serve` if there is one, else done here."),
    "apply": ("apply decided reviews and continue interrupted runs",
              "Apply every decided review and continue every interrupted run here, without a server, until each "
              "completes, pauses for its next review or fails (what `loopbot serve` does at its start)."),
    "init": ("write the commented example config",
             "Write the commented example config (the text of config.example.yaml) to PATH, default "
             "config.yaml; an existing file is never overwritten. Then edit it and run `loopbot check`."),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopbot", description="Run agent loops on a schedule; a person decides at every checkpoint.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    _config_option(parser, None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Subcommands accept --config too; SUPPRESS keeps a top-level one when they don't repeat it.
    common = argparse.ArgumentParser(add_help=False)
    _config_option(common, argparse.SUPPRESS)

    def command(name: str, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
        summary, description = _COMMAND_TEXTS[name]
        return commands.add_parser(name, parents=parents, help=summary, description=description)

    command("serve", [common])
    run = command("run", [common])
    run.add_argument("loop", metavar="LOOP", help="the name of a loop in the config")
    status = command("status", [common])
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--all", action="store_true", help="also every archived run and review, not only the latest")
    decide = command("decide", [common])
    decide.add_argument("review", metavar="REVIEW", help="the review's id, e.g. demo-1")
    decide.add_argument("decision", metavar="DECISION", help="approve | reject | retry | modify | pause")
    decide.add_argument("duration", nargs="?", metavar="DURATION",
                        help="pause only: how long, e.g. 2h or 1d (default 24h)")
    decide.add_argument("--feedback", default="", metavar="TEXT", help="note; a reject needs a reason")
    decide.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                        help="modify: a change, e.g. context.KEY=VALUE (repeatable; values are JSON when they "
                             "parse); pause: until=TIME with a zone, e.g. 2031-01-01T09:00Z")
    decide.add_argument("--as", dest="voter", metavar="NAME",
                        help="who is voting (default: $LOOPBOT_USER, else $USER, else the login name)")
    check = command("check", [common])
    check.add_argument("--offline", action="store_true",
                       help="do not contact Slack or GitHub (by default their tokens, scopes and access are checked)")
    command("loops", [common])
    cancel = command("cancel", [common])
    cancel.add_argument("run", metavar="RUN", help="the run's id, e.g. demo-run-3")
    cancel.add_argument("--reason", default="", metavar="TEXT", help="why: kept in the run's audit trail")
    cancel.add_argument("--as", dest="voter", metavar="NAME",
                        help="who cancels (default: $LOOPBOT_USER, else $USER, else the login name)")
    command("apply", [common])
    command("migrate", [common])
    export = command("export", [common])
    export.add_argument("file", metavar="FILE", help="the JSON file to write (must not exist yet)")
    import_ = command("import", [common])
    import_.add_argument("source", metavar="SOURCE",
                         help="a file written by `loopbot export`, or a directory store's state_dir")
    init = command("init", [common])
    init.add_argument("path", nargs="?", metavar="PATH",
                      help="where to write it (default: --config, else $LOOPBOT_CONFIG, else config.yaml, "
                           "the file the other commands read)")
    return parser


def _config_path(args: argparse.Namespace) -> Path:
    return Path(args.config or os.environ.get("LOOPBOT_CONFIG") or "config.yaml")


def _shown(path: Path) -> str:
    """``path`` for a shell: relative to the cwd when under it (``.venv/bin/loopbot``), else absolute."""
    absolute = Path(os.path.abspath(path))
    cwd = Path.cwd()
    if not absolute.is_relative_to(cwd) or cwd == Path(cwd.anchor):  # from /, "usr/bin/x" reads wrong
        return shlex.quote(str(absolute))
    relative = absolute.relative_to(cwd)
    # a bare name would be looked up on PATH, not here
    return shlex.quote(str(relative) if len(relative.parts) > 1 else f"./{relative}")


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _program() -> str:
    """This loopbot as the user can start it again: bare ``loopbot`` only if that is what PATH finds.

    After `make run` it is ``.venv/bin/loopbot``, which a fresh shell does not find as ``loopbot``.
    """
    argv0 = Path(sys.argv[0])
    if argv0.suffix == ".py":  # python -m bot.cli
        return f"{_shown(Path(sys.executable))} -m bot.cli"
    import shutil

    on_path = shutil.which("loopbot")
    if on_path and _same_file(on_path, argv0):
        return "loopbot"
    return _shown(argv0) if argv0.is_file() else "loopbot"


def _decide_command(path: Path) -> str:
    """The decide line serve and run print must work when pasted: this program, and a non-default config."""
    program = _program()
    if str(path) == "config.yaml" or os.environ.get("LOOPBOT_CONFIG") == str(path):
        return f"{program} decide"
    return f"{program} --config {shlex.quote(str(path))} decide"


def _err(message: str) -> None:
    print(f"loopbot: {message}", file=sys.stderr)


def _secrets(config: BotConfig | ConfigView) -> list[str]:
    return list(config.secret_values())


# -- commands ------------------------------------------------------------------


def cmd_check(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    print(f"OK: {path} is valid")
    print(config.summary())
    if not config.loops:  # valid (an empty file is), but serve would have nothing to run
        _err(f"warning: no loops configured in {path}; add one under loops: - see `loopbot init` for an example")
    for warning in config.review_warnings():
        _err(f"warning: {warning}")
    if args.offline:
        return EXIT_OK
    from bot.desk.connections import check_connections
    from bot.loop_catalog import LoopCatalog

    failed = False
    # each channel's connection, then each loop's own (daily-triage's GitHub, as that loop will use it)
    for line, ok in [*check_connections(config), *LoopCatalog(config, config_dir=path.parent).connection_checks()]:
        print(line) if ok else _err(line)
        failed = failed or not ok
    return EXIT_FAILED if failed else EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """Write the commented example config; never over an existing file (exit 1, saying so)."""
    from bot.init_config import InitError, write_example_config

    target = Path(args.path) if args.path else _config_path(args)
    try:
        written = write_example_config(target)
    except InitError as err:
        _err(str(err))
        return EXIT_FAILED
    config = "" if str(target) == "config.yaml" else f" --config {shlex.quote(str(target))}"
    program = _program()
    print(f"wrote {written}: the commented example config (the built-in demo loop, reviewed by you)")
    print(f"next: {program}{config} check, then {program}{config} serve")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.logging import setup_logging
    from bot.server import serve  # uvicorn and the scheduler load only for serve
    from bot.store import AlreadyRunningError

    setup_logging(secrets=_secrets(config), format=config.logging.format)
    try:
        return serve(config, decide_command=_decide_command(path))
    except AlreadyRunningError as err:
        _err(str(err))
        return EXIT_LOCKED
    except OSError as err:  # the port is taken, or the state dir cannot be created
        import errno

        where = f"cannot serve on {config.server.host}:{config.server.port} with state_dir {config.state_dir}"
        if err.errno == errno.EADDRINUSE:  # say how to choose another: the usual fix, and not an obvious one
            _err(f"{where}: port {config.server.port} is taken; set server.port or $PORT (0 picks a free one)")
        else:
            _err(f"{where}: {err}")
        return EXIT_FAILED


def _approve_lines(store: Store, review_id: str, decide_command: str) -> list[str]:
    """"approve with: LINE" for whoever runs it (``--as`` when $USER is not a local reviewer), then who may answer.

    Worded as the review file and `status` word it (``adapters.local.answer_as``); the note is a line of
    its own, so the decide line pastes whole.
    """
    from adapters.local import answer_as, answer_lines
    from bot.reviews import authorize
    from bot.status import where_to_answer

    review = store.get_review(review_id)
    elsewhere = where_to_answer(review)
    if elsewhere is not None:  # no decide line that the vote path would refuse
        return [elsewhere]
    reviewers = review.policy.reviewers
    voter = _voter_name(None)
    if reviewers.anyone or (voter is not None and authorize(reviewers, f"local:{voter}") is None):
        return [f"approve with: {answer_lines(review_id, decide_command)[0]}"]
    as_option, who = answer_as(reviewers.local)
    line = f"approve with: {answer_lines(review_id, decide_command, as_option)[0]}"
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
            _err(f"aborted: {named} stopped mid-step; `loopbot serve` continues it from its last saved step")
            return EXIT_SIGNAL_BASE + signal.SIGINT
    if run is None:  # the loop's slot is taken; we hold the state dir, so nothing else moves that run
        active = runner.active_run(loop)
        assert active is not None
        for line in active_run_help(active, store, local, _decide_command(path)):
            _err(line)
        return EXIT_FAILED
    if run.status == "running" and stop.signum is not None:
        progress = saved_progress(store.load_snapshot(run.id))
        print(f"interrupted: run {run.id} is saved {progress}; `loopbot serve` continues it")
        return EXIT_SIGNAL_BASE + stop.signum
    print(f"run {run.id}: {run.status}" + (f" - {run.reason}" if run.reason else ""))
    if run.status == "waiting" and run.review_id:
        print(f"review {run.review_id}: {local.path_for(run.review_id)}")
        for line in _approve_lines(store, run.review_id, _decide_command(path)):
            print(line)
        print("once it is decided, `loopbot apply` (or `loopbot run` again, or `loopbot serve`) resumes the run")
    return EXIT_OK if run.status in ("completed", "waiting") else EXIT_FAILED


def cmd_run(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.store import AlreadyRunningError, ServeLock
    from bot.store.open import open_store
    from bot.store.lock import ROLE_RUN, ROLE_SERVE
    from bot.loop_catalog import LoopCatalog, UnknownLoopError

    catalog = LoopCatalog(config)
    try:
        catalog.loop_config(args.loop)
    except UnknownLoopError as err:
        _err(str(err))
        return EXIT_USAGE
    state_dir = Path(config.state_dir)
    store = open_store(config)
    lock = ServeLock(state_dir)
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role != ROLE_SERVE:  # only a server reads the inbox: a request left here would start a run later
            _err(str(err))
            return EXIT_LOCKED
        from bot.foreground import busy_help

        busy = busy_help(store, catalog.loop_config(args.loop), err.pid, _decide_command(path))
        if busy:  # the server would only log that it skipped the request
            for line in busy:
                _err(line)
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

    setup_logging(secrets=_secrets(config), format=config.logging.format)
    store = store if store is not None else open_store(config)
    local = local_channel(Path(config.state_dir), _decide_command(path))
    desk = ReviewDesk(store, {"local": local}, clock=utcnow, inline=True)
    return Runner(config, store, desk), store, local


def cmd_apply(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.foreground import StopOnSignal
    from bot.store import AlreadyRunningError, ServeLock
    from bot.store.lock import ROLE_RUN, ROLE_SERVE

    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role == ROLE_SERVE:
            print(f"the running server (pid {err.pid}) applies decided reviews within a second; nothing to do here")
            return EXIT_OK
        _err(str(err))
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
    from bot.store import AlreadyRunningError, ServeLock, UnknownRunError
    from bot.store.lock import ROLE_RUN, ROLE_SERVE
    from bot.store.open import open_store
    from bot.loop_catalog import LoopCatalog, UnknownLoopError

    voter = _voter_name(args.voter)
    if not voter:
        _err("cannot tell who cancels: pass --as NAME or set LOOPBOT_USER")
        return EXIT_USAGE
    store = open_store(config)
    try:
        run = store.get_run(args.run)
    except UnknownRunError as err:
        _err(str(err))
        return EXIT_USAGE
    try:
        operators = LoopCatalog(config).loop_config(run.loop).operator_policy()
    except UnknownLoopError:  # the loop left the config: whoever may use this state dir may end its runs
        operators = None
    if operators is not None:
        refusal = Authorizer({"local": ListMembership("local")}, People.from_config(config.people)).refusal(
            operators, f"local:{voter}")
        if refusal is not None:
            _err(f"cancel refused: {refusal} (the operators of loop {run.loop} may cancel its runs)")
            return EXIT_FAILED
    if run.status not in ("running", "waiting"):
        _err(f"run {run.id} has already ended ({run.status}); there is nothing to cancel")
        return EXIT_FAILED
    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire(role=ROLE_RUN)
    except AlreadyRunningError as err:
        if err.role != ROLE_SERVE:
            _err(f"{err}; stop that foreground run (Ctrl-C), then cancel {run.id}")
            return EXIT_LOCKED
        store.enqueue_request("cancel", {"run": run.id, "by": f"local:{voter}", "reason": args.reason})
        print(f"handed to the running server (pid {err.pid}): run {run.id} is cancelled at its next tick")
        return EXIT_OK
    try:
        runner, _store, _local = _foreground(config, path)
        try:
            print(runner.cancel(run.id, f"local:{voter}", args.reason))
        except ValueError as err:
            _err(str(err))
            return EXIT_FAILED
        return EXIT_OK
    finally:
        lock.release()


def cmd_loops(args: argparse.Namespace, config: ConfigView, path: Path) -> int:
    from bot.loops_view import loops_lines, next_times, stored_next_times
    from bot.store.open import open_store

    now = datetime.now(UTC)
    upcoming = next_times(config.schedules, config.timezone, now)
    stored = stored_next_times(config.state_dir) or {}
    for loop in config.schedules:  # an interval counts from when serve scheduled it: its stored time, if any
        if loop.interval and stored.get(loop.name) is not None:
            upcoming[loop.name] = stored[loop.name]
    print("\n".join(loops_lines(config.schedules, config.timezone, _latest_runs(open_store(config)), now, upcoming)))
    return EXIT_OK


def _latest_runs(store: Store) -> list[Any]:
    """The active runs and the latest ended ones: each loop's last run, for the loops listing."""
    return [*store.list_runs(), *store.recent_runs(200)]


def cmd_status(args: argparse.Namespace, config: ConfigView, path: Path) -> int:
    from loop_engine.jsonvalue import gc_paused

    with gc_paused():  # its 20,000 records live until it prints: collecting cycles only walked them, again and again
        return _status(args, config, path)


def _status(args: argparse.Namespace, config: ConfigView, path: Path) -> int:
    from bot.logging import RedactingFilter
    from bot.status import render_json, render_page_links, render_replicas, render_table
    from bot.store import ServeLock, StoreError
    from bot.store.open import open_store
    from bot.store.lock import ROLE_SERVE, role_of

    store = open_store(config)
    if args.all:
        runs, reviews = store.list_runs(archived=True), store.list_reviews(archived=True)
    else:  # the hot set and the latest ended runs: as fast with 10,000 archived documents as with none
        recent = store.recent_runs(RECENT_RUNS)
        runs = sorted([*store.list_runs(), *recent], key=lambda r: r.created_at)
        reviews = store.list_reviews()
        hot = {r.id for r in reviews}
        for run in recent:
            if run.review_id and run.review_id not in hot:
                with contextlib.suppress(StoreError):  # one set aside is listed under problems below
                    reviews.append(store.get_review(run.review_id))
    tasks = store.pending_tasks()
    holder = ServeLock.holder(config.state_dir)
    serving = holder is not None and role_of(holder) == ROLE_SERVE
    shared = _replicas(store)
    if shared is not None:  # replicas on PostgreSQL: serving if one has beaten lately, wherever it runs
        serving = serving or any(r["fresh"] for r in shared["replicas"])
    text = render_json(runs, reviews, tasks, shared) if args.json else render_table(
        runs, reviews, _decide_command(path), serving=serving, voter=_voter_name(None), tasks=tasks
    ) + render_replicas(shared) + render_page_links(reviews, _page_url(config))
    if not args.json and config.schedules:  # the next times serve stored: APScheduler is not for status
        from bot.loops_view import loops_lines, stored_next_times

        lines = loops_lines(config.schedules, config.timezone, [*runs, *store.recent_runs(200)], datetime.now(UTC),
                            stored_next_times(config.state_dir))
        text += "\n\nloops:\n" + "\n".join(lines)
    problems = store.problems()
    if problems and not args.json:
        text += "\n\nproblems (documents set aside, the rest is served):\n" + "\n".join(f"- {p}" for p in problems)
    print(RedactingFilter(_secrets(config)).redact(text))
    return EXIT_OK


def _page_url(config: ConfigView) -> Callable[[str], str] | None:
    """The signed page link of a review when pages are on (``web.secret``), for the status table."""
    web = config.web
    if web.secret is None:
        return None
    from bot.web.links import ReviewLinks

    return ReviewLinks(web.secret, web.base_url, web.link_ttl, lambda: datetime.now(UTC)).url


def _replicas(store: Store) -> dict[str, Any] | None:
    """Which replica leads and each one's heartbeat (``fresh``: beaten within a minute); None off PostgreSQL."""
    if type(store).__name__ != "PostgresStore":
        return None
    from bot.replicas import replicas_view

    view = replicas_view(store)  # type: ignore[arg-type]
    now = datetime.now(UTC)
    for replica in view["replicas"]:
        replica["fresh"] = (now - datetime.fromisoformat(replica["heartbeat"])).total_seconds() < 60
    return view


def _login_name_as_user() -> None:
    """Give $USER the login name where the environment lacks it (containers, cron, systemd).

    The example config names ``${USER}`` as its reviewer and ``decide`` votes as
    $USER: both must see the same name, or the config says "you" while the vote
    comes from "root" and is refused.
    """
    if not os.environ.get("USER"):
        import contextlib
        import getpass

        # with no login name at all, --as or $LOOPBOT_USER must say who votes
        with contextlib.suppress(KeyError, OSError):
            os.environ["USER"] = getpass.getuser()


def _voter_name(given: str | None) -> str | None:
    """--as, else $LOOPBOT_USER, else $USER (what the example config names)."""
    return given or os.environ.get("LOOPBOT_USER") or os.environ.get("USER")


class _DecideTexts(NamedTuple):
    words: list[str]  #: every word `decide` takes, for a did-you-mean
    decisions: str  #: "decisions: approve (lgtm, yes), reject (deny, no), ..."
    usage: dict[HumanDecision | None, str]


@cache
def _decide_texts() -> _DecideTexts:
    """Built from the command grammar on first use, so that importing bot.cli does not load the grammar."""
    from adapters.commands import VERBS
    from loop_engine.review import HumanDecision

    specs = [spec for spec in VERBS if isinstance(spec.verb, HumanDecision)]
    return _DecideTexts(
        words=[name for spec in specs for name in spec.names],
        decisions="decisions: " + ", ".join(
            spec.names[0] + (f" ({', '.join(spec.names[1:])})" if spec.names[1:] else "") for spec in specs
        ),
        usage={
            None: "usage: loopbot decide REVIEW DECISION [DURATION] [--feedback TEXT] [--set KEY=VALUE ...] "
                  "[--as NAME]",
            HumanDecision.MODIFY: "usage: loopbot decide REVIEW modify --set context.KEY=VALUE ... "
                                  "(also plan.skip=[...], step.description=...) [--feedback TEXT]",
            HumanDecision.PAUSE: "usage: loopbot decide REVIEW pause [DURATION, e.g. 2h] "
                                 "[--set until=TIME-WITH-ZONE]",
        },
    )


def _changes(args: argparse.Namespace, decision: HumanDecision, now: datetime) -> dict[str, Any]:
    """The vote's changes from --set and DURATION; CommandError when they cannot go with ``decision``.

    Checked here, before the store is touched, so a bad line is a usage error
    that changes nothing.
    """
    from adapters.commands import CommandError, modification_problem, parse_assignments
    from adapters.durations import parse_duration
    from loop_engine.review import HumanDecision

    changes = parse_assignments(args.assignments)
    if args.duration is not None:
        if decision is not HumanDecision.PAUSE:
            raise CommandError(
                f'unexpected "{args.duration}": only pause takes a duration (e.g. `pause 2h`); '
                "give a note or reason with --feedback TEXT"
            )
        if "until" in changes:
            raise CommandError("give pause a duration or --set until=TIME, not both")
        try:
            changes["until"] = (now + parse_duration(args.duration)).isoformat()
        except ValueError as err:
            raise CommandError(f"pause: {err}") from None
    if decision is HumanDecision.MODIFY:
        problem = modification_problem(changes)
        if problem is not None:
            raise CommandError(problem)
    else:  # the vote rules refuse these too; said here, they are usage errors (exit 2) like every bad line
        from bot.reviews import changes_problem, pause_problem

        problem = changes_problem(decision, changes) or (
            pause_problem(changes["until"], now) if decision is HumanDecision.PAUSE and "until" in changes else None
        )
        if problem is not None:
            raise CommandError(problem)
    return changes


def _loop_check(path: Path) -> Callable[[str, dict[str, Any]], str | None] | None:
    """The loops' own word on a MODIFY (``LoopCatalog.modification_problem``), as `serve` asks it.

    Only for modify: it loads the whole config and builds the loop. A config
    that cannot be loaded so leaves the check to the run's resume.
    """
    from bot.config import ConfigError, load_config
    from bot.loop_catalog import LoopCatalog

    try:
        catalog = LoopCatalog(load_config(path, need_secrets=False), config_dir=path.parent)
    except ConfigError:
        return None
    return catalog.modification_problem


def cmd_decide(args: argparse.Namespace, config: ConfigView, path: Path) -> int:
    from adapters.commands import CommandError, decision_from_word
    from adapters.suggest import did_you_mean
    from bot.store import ServeLock, UnknownReviewError
    from bot.store.open import open_store
    from bot.store.lock import ROLE_SERVE, role_of
    from loop_engine.review import HumanDecision

    texts = _decide_texts()
    now = datetime.now(UTC)  # not bot.runner's utcnow: importing the runner loads the engine
    try:
        decision = decision_from_word(args.decision)
    except CommandError:  # its message is the chat help: say it in the CLI's words
        hint = did_you_mean(args.decision, texts.words)
        _err(f'unknown decision "{args.decision}"{hint}\n{texts.usage[None]}\n{texts.decisions}')
        return EXIT_USAGE
    try:
        modifications = _changes(args, decision, now)
    except CommandError as err:
        _err(f"{err}\n{texts.usage.get(decision, texts.usage[None])}")
        return EXIT_USAGE
    store = open_store(config)
    try:
        review = store.get_review(args.review)
    except UnknownReviewError as err:
        _err(str(err))
        return EXIT_USAGE
    voter = _voter_name(args.voter)
    if not voter:
        _err("cannot tell who is voting: pass --as NAME or set LOOPBOT_USER")
        return EXIT_USAGE
    from adapters.channel import AnswerKind, Identity, Reply
    from adapters.commands import Command
    from bot.desk import Authorizer, ListMembership, People, VotePath

    people = People.from_config(config.people)
    authorizer = Authorizer({"local": ListMembership("local")}, people)
    allowed = authorizer.refusal(review.policy.reviewers, f"local:{voter}") is None
    if allowed and decision is HumanDecision.REJECT and not args.feedback.strip() and review.outcome is None:
        # the vote rules would refuse it too, but with the chat's syntax
        _err(f'a reject needs a reason: {_decide_command(path)} {review.id} reject --feedback "the labels are wrong"')
        return EXIT_USAGE  # a missing argument, like modify without --set
    votes = VotePath(store, authorizer, clock=lambda: now, people=people,  # this process applies nothing
                     loop_check=_loop_check(path) if decision is HumanDecision.MODIFY else None)
    reply = Reply(Identity("local", voter, voter), Command(decision, review.id, args.feedback, modifications),
                  review_id=review.id, via="cli")
    answer = votes.handle(reply)
    if not answer.counted:
        _err(answer.text)
        return EXIT_FAILED
    print(answer.text)
    if answer.kind is AnswerKind.DECIDED:
        holder = ServeLock.holder(config.state_dir)
        if holder and role_of(holder) == ROLE_SERVE:
            print(f"the running server (pid {holder.get('pid')}) resumes the run within a second")
        elif holder:
            print(f"a foreground `loopbot run` (pid {holder.get('pid')}) holds the state dir: "
                  "the run resumes when `loopbot serve` next starts")
        else:
            print("no server is running: `loopbot apply` resumes the run now (as `loopbot run` and "
                  "`loopbot serve` do when they start)")
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.store import ServeLock
    from bot.store.open import open_store, store_url

    url = store_url(config)
    if url is not None:
        from bot.store.sql import migrate_database

        assert config.store is not None
        where, before, after = migrate_database(url, config.store.schema_name)
        print(f"{where}: schema version {after}" + (" (already)" if before == after else f" (was {before})"))
        return EXIT_OK
    from bot.store import AlreadyRunningError, legacy, sql_schema

    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire()
    except AlreadyRunningError as err:
        _err(f"{err}; stop it first, then migrate")
        return EXIT_LOCKED
    try:
        store = open_store(config, upgrading=True)
        print(f"{store.where}: schema version {sql_schema.SCHEMA_VERSION}")
        line = legacy.upgrade(config.state_dir, store)
        if line is not None:
            print(line)
    finally:
        lock.release()
    return EXIT_OK


def cmd_export(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.store.open import open_store
    from bot.store.sql_transfer import write_dump

    store = open_store(config)
    copied = write_dump(store, args.file)
    print(f"wrote {copied.line()} of {store.where} to {args.file}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.store import ServeLock
    from bot.store.open import open_store
    from bot.store.sql_transfer import load, read_dump

    source = Path(args.source)
    if source.is_dir() and ServeLock.holder(source) is not None:
        _err(f"{source} is in use by a loopbot serve or run; stop it first, then import")
        return EXIT_LOCKED
    data = read_dump(source)
    target = open_store(config)
    copied = load(target, data, target.where)
    print(f"copied {copied.line()} to {target.where}")
    return EXIT_OK


#: name -> command; status and decide take a ``ConfigView``, the others the ``BotConfig`` (see ``_load``)
COMMANDS: dict[str, Callable[[argparse.Namespace, Any, Path], int]] = {
    "check": cmd_check, "serve": cmd_serve, "run": cmd_run, "status": cmd_status, "decide": cmd_decide,
    "migrate": cmd_migrate, "export": cmd_export, "import": cmd_import, "loops": cmd_loops, "cancel": cmd_cancel,
    "apply": cmd_apply,
}
#: Commands that need no config to be loaded first: ``init`` writes it.
COMMANDS_WITHOUT_CONFIG = {"init": cmd_init}
#: The commands that build loops: they refuse a config naming a loop that cannot be built.
_BUILDS_LOOPS = frozenset({"check", "serve", "run", "apply"})
#: The commands that never read the channel blocks: they validate ``CoreConfig`` and get a ``ConfigView``.
_READ_VIEW = frozenset({"status", "decide", "loops"})
#: The commands that talk to Slack and GitHub, so need every variable of their blocks (`check --offline` does not).
_TALK_TO_CHANNELS = frozenset({"serve", "run", "check"})


def _check_loops(config: BotConfig, path: Path) -> None:
    """ConfigError naming each loop whose pattern, factory or options cannot be built.

    Not in load_config: importing a factory runs the user's code, which only
    the commands that build loops should do (status and decide never need to).
    """
    from bot.config import ConfigError
    from bot.loop_catalog import LoopCatalog

    problems = LoopCatalog(config, config_dir=path.parent).check()
    if problems:
        raise ConfigError([f"{path}: {line}" for line in problems])


def _load(args: argparse.Namespace, path: Path) -> BotConfig | ConfigView:
    """The config ``args.command`` works with; ConfigError when it is invalid, whichever the command.

    ``status`` and ``decide`` take a ``ConfigView`` (bot.config_memo): the
    channel blocks are not validated. A command that talks to no channel
    loads a config whose channel secrets' variables are unset.
    """
    if args.command in _READ_VIEW:
        from bot.config_memo import load_view

        return load_view(path)
    from bot.config import load_config

    talks = args.command in _TALK_TO_CHANNELS and not getattr(args, "offline", False)
    config = load_config(path, need_secrets=talks)
    if args.command in _BUILDS_LOOPS:
        _check_loops(config, path)
    return config


def _keep_double_dash(args: argparse.Namespace) -> None:
    """Python 3.11's argparse turns an option's value ``--`` (``--set=--``, ``--as=--``) into ``[]``.

    Every option of ours takes text, so that ``[]`` is put back as the text
    ``--`` given, and is judged like any other value (a usage error, mostly)
    instead of crashing the command that reads it.
    """
    for dest, value in vars(args).items():
        if value == [] and dest != "assignments":  # the one option whose own empty default is a list
            setattr(args, dest, "--")
        elif isinstance(value, list):
            setattr(args, dest, ["--" if item == [] else item for item in value])


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure ends as one ``loopbot: ...`` line and a documented exit code.

    The command boundary catches what the commands cannot foresee - a full
    disk, a read-only or hijacked state_dir, text that is not UTF-8, data
    nested past the stack - so that a person sees what to fix, not a traceback.
    """
    args = build_parser().parse_args(argv)
    _keep_double_dash(args)

    def utf8(text: str) -> bool:  # argv bytes that are not UTF-8 arrive as lone surrogates
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True

    for dest, value in sorted(vars(args).items()):  # before anything is stored: a half-written vote helps nobody
        texts = value if isinstance(value, list) else [value]
        if dest != "config" and any(isinstance(text, str) and not utf8(text) for text in texts):
            option = {"voter": "--as", "assignments": "--set", "feedback": "--feedback"}.get(dest, dest.upper())
            print(f"loopbot: {option} is not valid UTF-8 text; check the terminal's encoding (LANG, LC_ALL)",
                  file=sys.stderr)
            return EXIT_USAGE
    try:
        if args.command in COMMANDS_WITHOUT_CONFIG:
            return COMMANDS_WITHOUT_CONFIG[args.command](args)
        from bot.config_file import ConfigError
        from bot.store import StoreError

        _login_name_as_user()
        path = _config_path(args)
        try:
            config = _load(args, path)
        except ConfigError as err:
            _err(f"invalid config:\n{err}")
            return EXIT_FAILED
        try:
            return COMMANDS[args.command](args, config, path)
        except StoreError as err:
            _err(f"the store in {config.state_dir} is unusable: {err}")
            return EXIT_FAILED
    except OSError as err:  # EACCES, ENOSPC, EROFS, a file where a directory should be, a symlink refused
        where = err.filename if err.filename is not None else "a file in the state dir"
        print(f"loopbot: {where}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FAILED
    except UnicodeError as err:
        print(f"loopbot: text that is not valid UTF-8: {err}", file=sys.stderr)
        return EXIT_FAILED
    except RecursionError:
        print("loopbot: a value is nested too deeply to handle; nothing more was done", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover - `python -m bot.cli`
    sys.exit(main())
