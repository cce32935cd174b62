"""The serving process's HTTP server and interpreter settings: what ``bot.server.Bot`` runs its app on.

``HttpServer`` is uvicorn hardened for a bot exposed on 0.0.0.0
(``bot.http_guard``); ``bind_socket`` the listening socket it is given;
``settle_collector`` and ``favour_the_event_loop`` the process-wide settings
``serve`` makes once start-up is done.
"""

from __future__ import annotations

import gc
import socket
import sys
import threading
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from bot.http_guard import MAX_HEAD, guarded_protocol, limit_head

__all__ = ["bind_socket", "HttpServer", "settle_collector", "favour_the_event_loop", "YOUNG_COLLECTION_EVERY",
           "SWITCH_INTERVAL"]


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before serving so port 0 becomes a known port we can log and publish.

    The protocol is named: asyncio turns Nagle's algorithm off only on
    sockets whose ``proto`` says TCP, and a connection accepted from a
    ``proto`` 0 socket kept it on - every keep-alive answer in two segments
    then waited for the client's delayed ACK, 40 ms a request.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class HttpServer:
    """uvicorn in the main thread, with SIGTERM/SIGINT turned into a clean stop.

    Hardened for a bot exposed on 0.0.0.0, where idle or slow clients are
    cheap to make and the platform restarts a bot whose /healthz stops
    answering: a client must send a whole request within ``request_timeout``
    seconds of connecting (or of its previous response) - trickling a header
    byte at a time does not reset that clock, unlike uvicorn's own keep-alive
    timer - and once ``max_connections`` are open a new one evicts the
    connection that has waited longest without a request, so idle sockets
    cannot starve real requests (or the process's file descriptors). Only when
    every connection is busy with a request does uvicorn answer 503. A request
    line or headers over ``MAX_HEAD`` are refused (``bot.http_guard``).
    """

    def __init__(
        self,
        app: Starlette,
        sock: socket.socket,
        *,
        request_timeout: float = 10.0,
        keep_alive_timeout: float = 5.0,
        max_connections: int = 200,
        backlog: int = 256,
        graceful_shutdown_timeout: int = 3,
    ) -> None:
        self._sock = sock
        config = uvicorn.Config(
            limit_head(app),
            log_config=None,
            access_log=False,
            lifespan="off",
            http=guarded_protocol(request_timeout, max_connections),
            ws="none",  # no websocket routes: an upgrade would escape the request timeout
            timeout_keep_alive=keep_alive_timeout,  # type: ignore[arg-type]  # typed int; used as seconds
            limit_concurrency=max_connections + 1,  # the new connection itself, when no idle one could make room
            backlog=backlog,
            h11_max_incomplete_event_size=MAX_HEAD,  # a head still arriving; limit_head checks a whole one
            timeout_graceful_shutdown=graceful_shutdown_timeout,
        )
        self._server = uvicorn.Server(config)
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def request_stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """Safe from a signal handler: uvicorn checks should_exit on its next beat."""
        self._stopped.set()
        self._server.should_exit = True

    def run(self) -> None:
        if self._stopped.is_set():  # a signal arrived while we were starting
            return
        self._server.run(sockets=[self._sock])


#: Allocations between two collections of the youngest generation (Python's default: 700).
YOUNG_COLLECTION_EVERY = 10_000


#: Seconds a thread may hold the interpreter while another waits for it (CPython's default is 5 ms).
SWITCH_INTERVAL = 0.001


def favour_the_event_loop() -> None:
    """Let the HTTP event loop take the interpreter back from a busy thread within 1 ms, not 5.

    The event loop shares the interpreter with other threads (the webhook's
    recording thread, the vote caster, the outbox's API calls); each time it
    wants it back it waited up to the switch interval for a thread doing
    Python work. Under bench/github_intake_bench.py 1 ms answered ~20% more
    deliveries per second with a shorter p99.
    """
    sys.setswitchinterval(SWITCH_INTERVAL)


def settle_collector() -> None:
    """Leave what start-up loaded out of the cycle collector's walks, and walk less often.

    Serving a request allocates thousands of short-lived objects, nearly
    all freed by reference counting; the default threshold still runs a young
    collection several times per request, and every tenth of those walks
    the older generations: the modules, the config, the indexes and caches
    start-up built, which live as long as the process. Frozen, they are not
    walked again; the older collections that remain then pause a request for
    far less.
    """
    # kept: without it serve under vote load spends ~8% of its CPU collecting, ~90 ms pauses (test_settle_collector)
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, middle, old)
