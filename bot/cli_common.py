"""What the ``loopbot`` commands share: exit codes, the config path, this program's name, error lines, the voter.

The lines a command prints for a person to paste (``decide_command``) name
this loopbot as the user can start it again, and the config it was given.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bot.config import BotConfig
    from bot.config_memo import ConfigView

__all__ = [
    "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_LOCKED", "EXIT_SIGNAL_BASE", "EXIT_PIPE_CLOSED", "config_path",
    "decide_command", "print_error", "secret_values", "this_program", "voter_name",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
#: A foreground run stopped by a signal exits 128 + its number: 130 for Ctrl-C (SIGINT), 143 for SIGTERM.
EXIT_SIGNAL_BASE = 128
#: The reader of stdout went away (``loopbot status | head -1``): the status of a tool SIGPIPE ended, 128 + 13.
EXIT_PIPE_CLOSED = EXIT_SIGNAL_BASE + signal.SIGPIPE


def config_path(args: argparse.Namespace) -> Path:
    """--config, else $LOOPBOT_CONFIG, else config.yaml in the cwd (as --help says)."""
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


def this_program() -> str:
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


def decide_command(path: Path) -> str:
    """The decide line serve and run print must work when pasted: this program, and a non-default config."""
    program = this_program()
    if str(path) == "config.yaml" or os.environ.get("LOOPBOT_CONFIG") == str(path):
        return f"{program} decide"
    return f"{program} --config {shlex.quote(str(path))} decide"


def print_error(message: str) -> None:
    """One ``loopbot: ...`` line on stderr: every refusal and failure reads so, whatever the command."""
    print(f"loopbot: {message}", file=sys.stderr)


def secret_values(config: BotConfig | ConfigView) -> list[str]:
    """What the log and the printed text must never show (``bot.redaction``)."""
    return list(config.secret_values())


def voter_name(given: str | None) -> str | None:
    """--as, else $LOOPBOT_USER, else $USER (what the example config names)."""
    return given or os.environ.get("LOOPBOT_USER") or os.environ.get("USER")
