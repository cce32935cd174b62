"""A sender of HTTP/1.1 POSTs that costs its own process as little CPU per request as Python can.

A benchmark's load generator shares the machine's cores with what it
measures. Where the bot is bound by its own process (one replica) that
costs nothing, but where the bot's processes fill every core (three
replicas on two), each CPU-second the sender spends is one the bot does
not get, and each of its wake-ups preempts a bot process: the sender's
cost lands on one case and not the other. aiohttp spent 0.27-0.40 ms of
CPU per vote (its headers, cookies, pool and response objects); this
sender writes a request's bytes, built beforehand, on a kept-alive
connection and reads back the status line, ``Content-Length`` and body
(tens of µs). It is a load generator, not a client: it speaks only the
HTTP/1.1 a Starlette/uvicorn server answers (a ``Content-Length`` body on
a connection kept alive) and fails loudly at anything else.
"""

from __future__ import annotations

import asyncio

__all__ = ["Connection", "post_bytes"]


def post_bytes(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """A whole POST request to ``path`` on 127.0.0.1, ready to write."""
    lines = [f"POST {path} HTTP/1.1", "host: 127.0.0.1", f"content-length: {len(body)}",
             *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Connection(asyncio.Protocol):
    """One kept-alive connection, one request at a time: ``await connection.send(request)`` -> (status, body)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[int, bytes]] | None = None
        self._transport: asyncio.Transport | None = None

    @classmethod
    async def open(cls, port: int) -> Connection:
        _, connection = await asyncio.get_running_loop().create_connection(cls, "127.0.0.1", port)
        return connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(ConnectionError(f"the server closed the connection: {exc}"))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        assert self._transport is not None and self._answer is None, "one request at a time"
        self._answer = asyncio.get_running_loop().create_future()
        self._transport.write(request)
        try:
            return await self._answer
        finally:
            self._answer = None

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        end = self._buffer.find(b"\r\n\r\n")
        if end < 0 or self._answer is None:
            return
        head = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        length = next((int(line.split(":", 1)[1]) for line in head[1:]
                       if line[:15].lower() == "content-length:"), None)
        if length is None:
            self._answer.set_exception(ValueError(f"an answer without Content-Length: {head[0]}"))
            return
        if len(self._buffer) < end + 4 + length:
            return
        body = bytes(self._buffer[end + 4 : end + 4 + length])
        del self._buffer[: end + 4 + length]
        self._answer.set_result((int(head[0].split()[1]), body))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
