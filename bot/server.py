"""``loopbot serve``: the HTTP face (Starlette on uvicorn) and the life of the serving process.

Routes: ``GET /healthz`` (``bot.health``) here. Slack (``POST /slack/events``,
unless Socket Mode carries its requests) and GitHub (``POST /github/webhook``,
when a webhook secret is set) come from ``bot.desk.channels`` through
``extra_routes`` when those channels are configured. ``Bot`` is the serving
process's parts and their start and stop order; ``serve`` is a ``Bot`` run
until SIGTERM/SIGINT, which stop it the way ``Bot.stop`` says, and exit 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from contextlib import contextmanager
from functools import partial
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Route

from loop_engine.atomic import remove_stale_temp_files

from bot.config import BotConfig
from bot.desk import Decisions, ReviewDesk, VotePath
from bot.desk.control import RunControl
from bot.desk.channels import Channels
from bot.http_server import HttpServer, bind_socket, favour_the_event_loop, settle_collector
from bot.runner import Runner, utcnow
from bot.scheduler import LoopScheduler
from bot.health import health
from bot.service import Service
from bot.serve_lock import ServeLock
from bot.store.base import Store
from bot.store import legacy
from bot.store.open import open_store, store_url
from bot.store.sql import SqlStore
from bot.web.metrics import CountDeliveries, MeteredRunner, MeteredVotePath, Metrics
from bot.web.pages import review_links, web_routes
from bot.loop_catalog import LoopCatalog

__all__ = ["health", "create_app", "Bot", "serve", "STOP_BUDGET"]

log = logging.getLogger(__name__)


def create_app(
    store: Store,
    state_dir: Path,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    service: Service | None = None,
    desk: ReviewDesk | None = None,
    replicas: Callable[[], dict[str, Any]] | None = None,
    votes: VotePath | None = None,
    metrics: Metrics | None = None,
) -> Starlette:
    """The ASGI app; channel routes (Slack, GitHub) and the pages (``bot.web``) are the seam ``extra_routes``.

    ``service`` is the tick /healthz watches; serve passes the one it started.
    ``metrics`` counts the webhook routes' answers for /metrics.
    """

    async def healthz(request: Request) -> JSONResponse:
        code, body = await run_in_threadpool(health, store, Path(state_dir), service, desk, replicas, votes)
        return JSONResponse(body, status_code=code)

    middleware = [] if metrics is None else [Middleware(CountDeliveries, metrics=metrics)]
    return Starlette(routes=[Route("/healthz", healthz, methods=["GET"]), *extra_routes], middleware=middleware)


#: Seconds SIGTERM may take before the process exits: the platform's grace period is 10.
STOP_BUDGET = 9.0


def _leadership(config: BotConfig, store: Store, runner: Runner, fire: Callable[[str], None],
                port: int) -> Any:
    """On PostgreSQL, this replica's ``Leadership`` (not started yet); None for SQLite."""
    if config.store is None:
        return None
    from bot.replicas import Leadership
    from bot.store.sql import PostgresStore

    assert isinstance(store, PostgresStore)
    info = {"pid": os.getpid(), "host": socket.gethostname(), "port": port}
    return Leadership(config, store, runner, fire, interval=config.store.election_interval, info=info)


def _replicas_view(store: Store, me: str) -> dict[str, Any]:
    from bot.replicas import replicas_view
    from bot.store.sql import PostgresStore

    assert isinstance(store, PostgresStore)
    return replicas_view(store, me)


#: ``serve``'s exit status when its state dir was deleted or replaced under it (the CLI's "unusable state_dir").
EXIT_STATE_LOST = 1


def _exit_at_once(_reason: str) -> None:
    """Leave without the orderly stop: saving running steps would write into a state dir that is not ours.

    What the process had committed is safe as after a kill -9, which the store is built for.
    """
    logging.shutdown()
    os._exit(EXIT_STATE_LOST)


def _starter(runner: Runner) -> Callable[[str, str], str | None]:
    return lambda loop, trigger: runner.request_run(loop, trigger=trigger)


def loops_listing(config: BotConfig, store: Store, now: datetime | None = None) -> str:
    """`/loopbot loops`: what `loopbot loops` prints, from the config's own triggers and this store's runs."""
    from bot.config_memo import LoopSchedule
    from bot.loops_view import loops_lines, next_times

    when = now or utcnow()
    loops = [LoopSchedule(loop.name, loop.schedule.cron if loop.schedule else None,
                          loop.schedule.interval.total_seconds() if loop.schedule and loop.schedule.interval else None,
                          loop.schedule.timezone if loop.schedule else None) for loop in config.loops]
    runs = [*store.list_runs(), *store.recent_runs(200)]
    return "\n".join(loops_lines(loops, config.timezone, runs, when, next_times(loops, config.timezone, when)))


def _log_waiting_reviews(store: Store, decide_command: str) -> None:
    """One line naming the reviews that wait, with the way to answer: the decide lines printed before the restart
    scrolled away. Only the first few are read: reading all of them would hold their memory for good."""
    waiting = store.open_reviews(limit=5)
    if not waiting:
        return
    from adapters.local_answers import answer_as, answer_lines
    from bot.status import where_to_answer

    total = max(store.counts()["open_reviews"], len(waiting))
    shown = ", ".join(r.id for r in waiting) + (", ..." if total > len(waiting) else "")
    first = waiting[0]
    elsewhere = where_to_answer(first)
    if elsewhere is not None:  # no decide line that the vote path would refuse
        log.info("%d review(s) wait for a decision: %s; %s", total, shown, elsewhere)
    else:
        as_option, who = answer_as(None if first.policy.reviewers.anyone else first.policy.reviewers.local)
        log.info("%d review(s) wait for a decision: %s; answer with `%s`%s",
                 total, shown, answer_lines(first.id, decide_command, as_option)[0], f" ({who})" if who else "")


class Bot:
    """The serving bot: its parts built and wired by ``start()``, brought down in order by ``stop()``.

    ``start`` takes the serve lock (one server per state dir; AlreadyRunningError
    otherwise), binds the socket (port 0 allowed: the bound port goes into the
    lock info and the log), recovers unfinished runs and starts the outbox, the
    channels, the scheduler and the tick; ``serve_http`` then answers HTTP in
    the calling thread until ``request_stop``. ``stop`` stops accepting, lets
    each running step finish and be saved (engines stop at their next step
    boundary; whatever still runs after ``STOP_BUDGET`` continues from its last
    snapshot at the next start) and releases the lock: a Bot may start again.
    """

    def __init__(self, config: BotConfig, *, decide_command: str = "loopbot decide") -> None:
        self.config = config
        self.state_dir = Path(config.state_dir)
        self._decide_command = decide_command
        self._lock = ServeLock(self.state_dir)
        self._stop_asked = threading.Event()
        self._http: HttpServer | None = None
        self._stops: list[Callable[[float], object]] = []  # the started parts' stops, in the order stop() runs them

    @property
    def port(self) -> int:
        """The bound port (the one the OS picked for ``server.port: 0``)."""
        if self._http is None:
            raise RuntimeError("the bot is not started")
        return self._http.port

    def request_stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """End ``serve_http`` (or keep it from starting); safe from a signal handler."""
        self._stop_asked.set()
        if self._http is not None:
            self._http.request_stop()

    def serve_http(self) -> None:
        """Answer HTTP in this thread until ``request_stop``."""
        if self._http is None:
            raise RuntimeError("the bot is not started: call start() first")
        if not self._stop_asked.is_set():
            self._http.run()

    def start(self) -> None:
        """Take the lock and bring every part up; whatever started is stopped again if a later part fails."""
        if self._http is not None:
            raise RuntimeError("the bot is started already: stop() it first")
        self._lock.acquire()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        config, state_dir, lock, decide_command = self.config, self.state_dir, self._lock, self._decide_command
        leftovers = remove_stale_temp_files(state_dir)  # safe now: we are the only long-lived writer
        if leftovers:
            log.info("removed %d temp file(s) left by interrupted writes", len(leftovers))
        sock = bind_socket(config.server.host, config.server.port)
        self._stops.append(lambda _left: sock.close())
        store = open_store(config, upgrading=True)
        if isinstance(store, SqlStore):
            self._stops.append(lambda _left: store.close())  # last: after every part that uses it
        upgraded = legacy.upgrade(state_dir, store) if store_url(config) is None else None
        if upgraded is not None:
            log.info("%s", upgraded)
        channels = Channels(config, store, decide_command)
        metrics = Metrics(store, utcnow)
        links = review_links(config, utcnow)  # pages on: every review message links its page
        desk = ReviewDesk(store, channels.posting(), clock=utcnow, page_url=None if links is None else links.url)
        catalog = LoopCatalog(config)
        runner = MeteredRunner(config, store, desk, catalog=catalog, metrics=metrics)
        # every decided review reaches the runner here: published by the vote path, or by the tick from the store
        decisions = Decisions()
        decisions.subscribe(runner.apply_decided)
        control = RunControl(store, channels.authorizer(), config.loops, start=_starter(runner), cancel=runner.cancel,
                             listing=partial(loops_listing, config, store))
        votes = MeteredVotePath(store, channels.authorizer(), clock=utcnow, people=channels.people,
                                decisions=decisions, loop_check=catalog.modification_problem, control=control,
                                metrics=metrics)
        port = int(sock.getsockname()[1])

        def fire(name: str) -> None:
            runner.request_run(name, trigger="schedule")

        leadership = _leadership(config, store, runner, fire, port)
        service = Service(store, runner, leader=leadership, lost=lock.lost, on_lost=_exit_at_once, decisions=decisions)
        view = None if leadership is None else partial(_replicas_view, store, leadership.name)
        scheduler = LoopScheduler(config, state_dir, fire) if leadership is None else None
        pages = web_routes(config, store, clock=utcnow, metrics=metrics,
                           next_runs=lambda: scheduler.next_run_times() if scheduler is not None else {})
        app = create_app(store, state_dir, [*channels.routes(votes, desk), *pages], service=service, desk=desk,
                         replicas=view, votes=votes, metrics=metrics)
        self._http = http = HttpServer(app, sock)
        if self._stop_asked.is_set():  # a signal arrived while we were building
            http.request_stop()
        lock.update(port=http.port)
        log.info(
            "loopbot serving on http://%s:%d (pid %d, state_dir %s)",
            config.server.host, http.port, os.getpid(), state_dir,
        )
        for line in config.summary().splitlines():  # each its own record: a record is one line
            log.info("config: %s", line)
        for warning in config.review_warnings():
            log.warning("%s", warning)
        # the order stop() runs them: the runner first, so engines stop at their next boundary while the rest
        # shuts down; a leader stepping down lets another replica lead at once; whatever was saved continues there
        self._stops[:0] = [
            lambda _left: runner.request_stop(),
            lambda _left: scheduler.stop(wait=False) if scheduler is not None else None,
            lambda _left: leadership.stop() if leadership is not None else None,
            lambda _left: service.stop(),
            lambda left: runner.shutdown(timeout=max(0.0, left)),
            lambda _left: channels.stop(),
            lambda left: desk.stop(timeout=max(0.1, min(2.0, left))),
        ]
        if leadership is None:
            runner.recover()
        if problems := store.problems():
            log.error("documents set aside (the rest is served): %s", "; ".join(problems))
        _log_waiting_reviews(store, decide_command)

        desk.start()
        channels.start(votes, desk)
        # the leader (elected by this first round, or later) starts the scheduler and restarts interrupted runs
        if scheduler is not None:
            scheduler.start()
            metrics.watch_scheduler(scheduler.apscheduler)
        if leadership is None or leadership.start():  # replicas: the one leading at its start runs run_on_start loops
            for loop in config.loops:
                if loop.run_on_start:
                    runner.request_run(loop.name, trigger="start")
        service.start(config.scheduler.poll_interval)

    def stop(self) -> None:
        """Stop every started part within ``STOP_BUDGET`` (running steps finish and are saved), release the lock."""
        stops, self._stops = self._stops, []
        try:
            if stops:
                deadline = time.monotonic() + STOP_BUDGET
                log.info("stopping: running steps finish and are saved (up to %.0f s)", STOP_BUDGET)
                for stop in stops:
                    stop(deadline - time.monotonic())
        finally:
            self._http = None
            self._stop_asked.clear()  # asked of this life: a later start() serves again
            self._lock.release()


@contextmanager
def _stopping_on_signals(stop: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGTERM/SIGINT call ``stop`` (not the default handler, which would exit 143) until the bot has stopped.

    In place around uvicorn's own handlers, so its re-raise of a signal after
    its shutdown lands here too.
    """
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve(config: BotConfig, *, decide_command: str = "loopbot decide") -> int:
    """Run the bot until SIGTERM/SIGINT; raises AlreadyRunningError if another serve holds the state dir."""
    bot = Bot(config, decide_command=decide_command)
    with _stopping_on_signals(bot.request_stop):
        bot.start()
        try:
            settle_collector()
            favour_the_event_loop()
            bot.serve_http()
        finally:
            bot.stop()
    log.info("loopbot stopped")
    return 0
