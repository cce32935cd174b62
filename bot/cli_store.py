"""The ``loopbot`` commands that carry the store's data: ``migrate`` (the schema), ``export`` and ``import``.

``migrate`` and ``import`` refuse while a serve or a foreground run holds
the state dir they would change (exit 3).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bot.cli_common import EXIT_LOCKED, EXIT_OK, print_error

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bot.config import BotConfig

__all__ = ["cmd_export", "cmd_import", "cmd_migrate"]


def cmd_migrate(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.serve_lock import ServeLock
    from bot.store.open import open_store, store_url

    url = store_url(config)
    if url is not None:
        from bot.store.sql import migrate_database

        assert config.store is not None
        where, before, after = migrate_database(url, config.store.schema_name)
        print(f"{where}: schema version {after}" + (" (already)" if before == after else f" (was {before})"))
        return EXIT_OK
    from bot.store import legacy, sql_schema
    from bot.serve_lock import AlreadyRunningError

    lock = ServeLock(Path(config.state_dir))
    try:
        lock.acquire()
    except AlreadyRunningError as err:
        print_error(f"{err}; stop it first, then migrate")
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
    print(f"wrote {copied} of {store.where} to {args.file}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace, config: BotConfig, path: Path) -> int:
    from bot.serve_lock import ServeLock
    from bot.store.open import open_store
    from bot.store.sql_transfer import load, read_dump

    source = Path(args.source)
    if source.is_dir() and ServeLock.holder(source) is not None:
        print_error(f"{source} is in use by a loopbot serve or run; stop it first, then import")
        return EXIT_LOCKED
    data = read_dump(source)
    target = open_store(config)
    copied = load(target, data, target.where)
    print(f"copied {copied} to {target.where}")
    return EXIT_OK
