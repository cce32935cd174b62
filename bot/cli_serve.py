"""``loopbot serve`` and the two commands that prepare for it: ``init`` writes a config, ``check`` validates it.

``check`` also asks Slack and GitHub whether the config's tokens will work,
unless ``--offline``; ``serve`` loads uvicorn and the scheduler only when it runs.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli_common import (
    EXIT_FAILED, EXIT_LOCKED, EXIT_OK, config_path, decide_command, print_error, secret_values, this_program,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bot.config import BotConfig

__all__ = ["cmd_check", "cmd_init", "cmd_serve"]


def cmd_check(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    print(f"OK: {path} is valid")
    print(config.summary())
    if not config.loops:  # valid (an empty file is), but serve would have nothing to run
        print_error(f"warning: no loops configured in {path}; add one under loops: - see `loopbot init` for an example")
    for warning in config.review_warnings():
        print_error(f"warning: {warning}")
    if args.offline:
        return EXIT_OK
    from bot.desk.connections import check_connections
    from bot.loop_catalog import LoopCatalog

    failed = False
    # each channel's connection, then each loop's own (daily-triage's GitHub, as that loop will use it)
    for line, ok in [*check_connections(config), *LoopCatalog(config, config_dir=path.parent).connection_checks()]:
        print(line) if ok else print_error(line)
        failed = failed or not ok
    return EXIT_FAILED if failed else EXIT_OK


def cmd_init(args: argparse.Namespace) -> int:
    """Write the commented example config; never over an existing file (exit 1, saying so)."""
    from bot.init_config import InitError, write_example_config

    target = Path(args.path) if args.path else config_path(args)
    try:
        written = write_example_config(target)
    except InitError as err:
        print_error(str(err))
        return EXIT_FAILED
    config = "" if str(target) == "config.yaml" else f" --config {shlex.quote(str(target))}"
    program = this_program()
    print(f"wrote {written}: the commented example config (the built-in demo loop, reviewed by you)")
    print(f"next: {program}{config} check, then {program}{config} serve")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.logging import setup_logging
    from bot.server import serve  # uvicorn and the scheduler load only for serve
    from bot.serve_lock import AlreadyRunningError

    setup_logging(secrets=secret_values(config), format=config.logging.format)
    try:
        return serve(config, decide_command=decide_command(path))
    except AlreadyRunningError as err:
        print_error(str(err))
        return EXIT_LOCKED
    except OSError as err:  # the port is taken, or the state dir cannot be created
        import errno

        where = f"cannot serve on {config.server.host}:{config.server.port} with state_dir {config.state_dir}"
        if err.errno == errno.EADDRINUSE:  # say how to choose another: the usual fix, and not an obvious one
            print_error(f"{where}: port {config.server.port} is taken; set server.port or $PORT (0 picks a free one)")
        else:
            print_error(f"{where}: {err}")
        return EXIT_FAILED
