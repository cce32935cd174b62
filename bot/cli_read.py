"""The ``loopbot`` commands that read the state and change nothing: ``status`` and ``loops``.

They are the ones people run most and pipe into other tools, so they take a
``ConfigView`` (bot.config_memo: the channel blocks are not validated) and
load no engine, scheduler or pydantic, nor a channel, logging or file writing
(tests/bot/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.cli_common import EXIT_OK, decide_command, secret_values, voter_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bot.config_memo import ConfigView
    from bot.store import Store

__all__ = ["cmd_loops", "cmd_status", "RECENT_RUNS"]

#: How many ended runs `status` shows besides the active ones (`--all` shows every one).
RECENT_RUNS = 10


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
    from bot.redaction import Redactor
    from bot.status import render_json, render_page_links, render_replicas, render_table
    from bot.store import StoreError
    from bot.store.open import open_store
    from bot.serve_lock import ROLE_SERVE, ServeLock, role_of

    store = open_store(config)
    history = bool(args.json)  # the table shows the current votes (and no proposal); --json prints every vote
    if args.all:
        runs, reviews = store.list_runs(archived=True), store.list_reviews(archived=True, history=history,
                                                                           request=False)
    else:  # the hot set and the latest ended runs: as fast with 10,000 archived documents as with none
        recent = store.recent_runs(RECENT_RUNS)
        runs = sorted([*store.list_runs(), *recent], key=lambda r: r.created_at)
        reviews = store.list_reviews(history=history, request=False)
        hot = {r.id for r in reviews}
        for run in recent:
            if run.review_id and run.review_id not in hot:
                with contextlib.suppress(StoreError):  # one set aside is listed under problems below
                    reviews.append(store.get_review(run.review_id, history=history))
    tasks = store.pending_tasks()
    holder = ServeLock.holder(config.state_dir)
    serving = holder is not None and role_of(holder) == ROLE_SERVE
    shared = _replicas(store)
    if shared is not None:  # replicas on PostgreSQL: serving if one has beaten lately, wherever it runs
        serving = serving or any(r["fresh"] for r in shared["replicas"])
    text = render_json(runs, reviews, tasks, shared) if args.json else render_table(
        runs, reviews, decide_command(path), serving=serving, voter=voter_name(None), tasks=tasks
    ) + render_replicas(shared) + render_page_links(reviews, _page_url(config))
    if not args.json and config.schedules:  # the next times serve stored: APScheduler is not for status
        from bot.loops_view import loops_lines, stored_next_times

        lines = loops_lines(config.schedules, config.timezone, [*runs, *store.recent_runs(200)], datetime.now(UTC),
                            stored_next_times(config.state_dir))
        text += "\n\nloops:\n" + "\n".join(lines)
    problems = store.problems()
    if problems and not args.json:
        text += "\n\nproblems (documents set aside, the rest is served):\n" + "\n".join(f"- {p}" for p in problems)
    print(Redactor(secret_values(config)).redact(text))
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
