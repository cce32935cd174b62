"""The ``loopbot`` command: parse the line, load the config the command needs, run it, end in one exit code.

``run`` and ``decide`` work with or without a server: ``run`` hands the run
to a live ``serve`` (through the store's inbox) or runs in the foreground
until the run completes or pauses; ``decide`` only records a vote - the lock
holder applies decided reviews (within a second when serving; else ``apply``,
or a foreground ``run`` before it starts, applies them).

The commands live by what they do: ``cli_grammar`` (the parser and its
texts), ``cli_read`` (status, loops), ``cli_decide``, ``cli_runs`` (run,
apply, cancel), ``cli_store`` (migrate, export, import), ``cli_serve``
(serve, check, init); ``cli_common`` holds what they share.

``main`` imports the one module of the command it runs, and every command
imports what it needs inside its function, so ``--help``,
``status`` and ``decide`` load none of the engine, jsonschema, asyncio and
the scheduler (bench/cli_startup_bench.py). tests/bot/test_cli_imports.py
keeps ``import bot.cli`` free of them; keep the module-level imports of
every ``bot.cli*`` module to the standard library and each other.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli_common import (
    EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_PIPE_CLOSED, EXIT_SIGNAL_BASE, EXIT_USAGE, config_path, print_error,
)
from bot.cli_grammar import build_parser

if TYPE_CHECKING:  # pragma: no cover - typing only; each command loads what it needs when it runs
    from bot.config import BotConfig
    from bot.config_memo import ConfigView

__all__ = [
    "main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_LOCKED", "EXIT_SIGNAL_BASE",
    "EXIT_PIPE_CLOSED",
]

#: name -> the ``bot`` module whose ``cmd_<name>`` runs it, imported when it runs (one command loads one);
#: status and decide take a ``ConfigView``, the others the ``BotConfig`` (see ``_load``)
COMMANDS = {
    "check": "cli_serve", "serve": "cli_serve", "run": "cli_runs", "status": "cli_read", "decide": "cli_decide",
    "migrate": "cli_store", "export": "cli_store", "import": "cli_store", "loops": "cli_read", "cancel": "cli_runs",
    "apply": "cli_runs",
}
#: Commands that need no config to be loaded first: ``init`` writes it.
COMMANDS_WITHOUT_CONFIG = {"init": "cli_serve"}


def _command(name: str) -> Callable[..., int]:
    """``cmd_<name>`` of the module that holds the command."""
    module = COMMANDS.get(name) or COMMANDS_WITHOUT_CONFIG[name]
    command: Callable[..., int] = getattr(importlib.import_module(f"bot.{module}"), f"cmd_{name}")
    return command
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

    A reader that went away (``loopbot status | head -1``) ends it as Unix
    tools end: nothing more is printed, no error, exit 141 (128 + SIGPIPE).
    Python ignores SIGPIPE, so the closed pipe arrives as BrokenPipeError -
    from a print, or from the last flush, which is therefore done here and
    not at interpreter exit; then stdout is pointed at /dev/null, so that the
    exit's own flush of what is left fails no more (the signal module docs'
    "Note on SIGPIPE").
    """
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):  # a stdout with no file descriptor (a test's capture)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE_CLOSED


def _run(argv: Sequence[str] | None) -> int:
    """Parse and run one command, catching at its boundary what the commands cannot foresee.

    A full disk, a read-only or hijacked state_dir, text that is not UTF-8,
    data nested past the stack: so that a person sees what to fix, not a
    traceback.
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
            return _command(args.command)(args)
        from bot.config_file import ConfigError
        from bot.store import StoreError

        _login_name_as_user()
        path = config_path(args)
        try:
            config = _load(args, path)
        except ConfigError as err:
            print_error(f"invalid config:\n{err}")
            return EXIT_FAILED
        try:
            return _command(args.command)(args, config, path)
        except StoreError as err:
            print_error(f"the store in {config.state_dir} is unusable: {err}")
            return EXIT_FAILED
    except BrokenPipeError:  # stdout's reader went away: not a file's fault (see main)
        raise
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


def _login_name_as_user() -> None:
    """Give $USER the login name where the environment lacks it (containers, cron, systemd).

    The example config names ``${USER}`` as its reviewer and ``decide`` votes as
    $USER: both must see the same name, or the config says "you" while the vote
    comes from "root" and is refused.
    """
    if not os.environ.get("USER"):
        import getpass

        # with no login name at all, --as or $LOOPBOT_USER must say who votes
        with contextlib.suppress(KeyError, OSError):
            os.environ["USER"] = getpass.getuser()


if __name__ == "__main__":  # pragma: no cover - `python -m bot.cli`
    sys.exit(main())
