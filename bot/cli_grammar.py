"""The ``loopbot`` command line's grammar: its commands, their options and help texts, the exit codes' epilog.

Apart from what the commands do, so that ``--help``, ``--version`` and a
usage error build this parser and load nothing else. Like every ``bot.cli*``
module it imports only the standard library at its top
(tests/bot/test_cli_imports.py); the commands load what they need when they run.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["EPILOG", "build_parser"]

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
  141  the reader of the output went away (`loopbot status | head -1`): the command stops printing, quietly

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
