"""What ``loopbot serve`` asks of each HTTP connection before a request reaches the app.

``guarded_protocol``: uvicorn's h11 protocol with a deadline for the whole
request and the eviction of idle connections - no public uvicorn option does
either, hence the subclass. ``limit_head``: an ASGI wrapper refusing a
request line or headers over ``MAX_HEAD``. ``bot.http_server.HttpServer`` puts
both in front of the app.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["MAX_HEAD", "guarded_protocol", "limit_head"]

log = logging.getLogger(__name__)

#: Bytes of request line plus headers a request may have: Slack and GitHub send about 2 kB.
MAX_HEAD = 16 * 1024


def limit_head(app: ASGIApp, max_head: int = MAX_HEAD) -> ASGIApp:
    """``app`` behind a size limit on the request line (414) and on the line and headers together (431).

    uvicorn's ``h11_max_incomplete_event_size`` bounds only a head still
    arriving: one that comes whole in a single read (asyncio reads up to
    256 KiB) was parsed and served, with a 70 kB URL. The answer closes the
    connection, and nothing of the request is logged.
    """

    async def limited(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            line = len(scope["method"]) + len(scope["raw_path"]) + len(scope["query_string"]) + 12
            if line > max_head:
                refusal = PlainTextResponse("URI too long", 414, headers={"connection": "close"})
                return await refusal(scope, receive, send)
            if line + sum(len(name) + len(value) + 4 for name, value in scope["headers"]) > max_head:
                refusal = PlainTextResponse("request headers too large", 431, headers={"connection": "close"})
                return await refusal(scope, receive, send)
        await app(scope, receive, send)

    return limited


def guarded_protocol(request_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a whole-request deadline and eviction of idle connections."""
    import h11
    # private, kept: uvicorn has no deadline for a request still arriving nor idle eviction (test_http_guard.py)
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_since = 0.0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._await_request()
            live = [c for c in self.connections if not c.transport.is_closing()]
            if len(live) > max_connections:
                idle = [c for c in live if isinstance(c, GuardedH11Protocol) and c._deadline is not None]
                if idle:
                    min(idle, key=lambda c: c._waiting_since)._close()
                    log.warning("more than %d connections open: closed the one idle longest", max_connections)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
                self._stop_waiting()  # the request is in: how long the app takes is not the client's doing

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self._await_request()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_request(self) -> None:
            self._stop_waiting()
            self._waiting_since = self.loop.time()
            self._deadline = self.loop.call_later(request_timeout, self._close)

        def _stop_waiting(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _close(self) -> None:
            self._stop_waiting()
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
