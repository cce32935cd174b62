"""The fake Slack's Socket Mode endpoint: a real WebSocket server (``websockets``) on 127.0.0.1.

It says hello as Slack does, sends the envelopes a test gives it and hands
back the acknowledgement the app sent for each.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

__all__ = ["FakeSocketMode"]


class FakeSocketMode:
    """Slack's Socket Mode endpoint on ws://127.0.0.1:PORT/link, in its own thread and event loop.

    ``send(envelope_type, payload)`` delivers one envelope to the connected
    app and returns the acknowledgement it sent back (``{"envelope_id",
    "payload"?}``).
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-socket-mode", daemon=True)
        self._server: Any = None
        self._connections: list[Any] = []
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.connected = threading.Event()
        self.received: list[dict[str, Any]] = []

    def start(self) -> FakeSocketMode:
        from websockets.asyncio.server import serve

        self._thread.start()

        async def open_server() -> Any:
            return await serve(self._serve, "127.0.0.1", 0)

        self._server = asyncio.run_coroutine_threadsafe(open_server(), self._loop).result(5)
        return self

    @property
    def url(self) -> str:
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/link"

    async def _serve(self, connection: Any) -> None:
        self._connections.append(connection)
        await connection.send(json.dumps({"type": "hello", "num_connections": 1,
                                          "connection_info": {"app_id": "A0APP"}}))
        self.connected.set()
        try:
            async for raw in connection:
                message = json.loads(raw)
                self.received.append(message)
                future = self._acks.get(message.get("envelope_id", ""))
                if future is not None and not future.done():
                    future.set_result(message)
        finally:
            self._connections.remove(connection)
            if not self._connections:
                self.connected.clear()

    def send(self, envelope_type: str, payload: dict[str, Any], *, timeout: float = 5.0) -> dict[str, Any]:
        """Deliver an envelope and wait for the app's ack."""
        envelope_id = str(uuid.uuid4())

        async def deliver() -> dict[str, Any]:
            future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
            self._acks[envelope_id] = future
            envelope = {"envelope_id": envelope_id, "type": envelope_type, "payload": payload,
                        "accepts_response_payload": envelope_type != "events_api"}
            await self._connections[-1].send(json.dumps(envelope))
            return await asyncio.wait_for(future, timeout)

        return asyncio.run_coroutine_threadsafe(deliver(), self._loop).result(timeout + 1)

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
