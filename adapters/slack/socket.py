"""How does a bot without a public URL hear from Slack? ``SocketModeRunner``: the same app over Socket Mode.

With ``slack.app_token`` (``xapp-...``) set, Slack delivers commands,
clicks and events over a WebSocket the bot opens (``apps.connections.open``)
instead of POSTing to ``/slack/events``. The runner drives Bolt's
``AsyncSocketModeHandler`` (aiohttp) on its own event loop in a daemon
thread, so a caller with or without an event loop can ``start()`` it (which
returns once connected, or raises ``SocketModeError``) and ``stop()`` it.
slack_sdk's client reconnects by itself after a dropped connection or a
``disconnect`` request.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import aiohttp
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError

__all__ = ["SocketModeError", "SocketModeRunner"]

log = logging.getLogger(__name__)


class SocketModeError(RuntimeError):
    """Socket Mode could not connect (a bad app token, Socket Mode off for the app, no network)."""


class SocketModeRunner:
    """``SocketModeRunner(build_app(...), "xapp-...").start()``; ``stop()`` closes the connection."""

    def __init__(self, app: AsyncApp, app_token: str, *, ping_interval: float = 10.0) -> None:
        if not app_token.startswith("xapp-"):
            raise ValueError("slack.app_token must be an app-level token (xapp-...) with connections:write")
        self.app = app
        self.app_token = app_token
        self.ping_interval = ping_interval
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 30.0) -> None:
        """Connect in a daemon thread; return once Slack said hello, else raise SocketModeError."""
        if self.running:
            return
        self._ready.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="slack-socket-mode", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise SocketModeError(f"Socket Mode did not connect within {timeout:g}s")
        if self._error is not None:
            self._thread.join(5)
            raise SocketModeError(f"Socket Mode could not connect: {self._error}") from self._error

    def stop(self, timeout: float = 10.0) -> None:
        """Close the connection and end the thread (a no-op when not running)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the Socket Mode thread did not end within %gs", timeout)
        self._thread = None

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        handler = AsyncSocketModeHandler(self.app, self.app_token, ping_interval=self.ping_interval)
        try:
            try:  # asked once here, so a bad token fails start() instead of retrying forever inside connect
                handler.client.wss_uri = await handler.client.issue_new_wss_url()
            except (SlackApiError, SlackClientError, aiohttp.ClientError, OSError) as exc:
                self._error = exc
                return
            connect = asyncio.ensure_future(handler.connect_async())
            stopped = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait({connect, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if connect.done() and connect.exception() is not None:
                self._error = connect.exception()
            elif connect.done():
                log.info("Slack Socket Mode connected")
                self._ready.set()
                await stopped
            else:
                connect.cancel()
        finally:
            self._ready.set()
            await handler.close_async()
            log.info("Slack Socket Mode closed")
