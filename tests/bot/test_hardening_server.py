"""Idle and slow clients cannot starve the HTTP server (issue #12, "HTTP hardening").

Real sockets on 127.0.0.1 against a small Starlette app served by HttpServer in a thread.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bot.http_server import HttpServer, bind_socket


async def healthz(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


async def slow(request: Request) -> PlainTextResponse:
    await anyio.sleep(1.0)  # the app being slow, longer than the request timeout
    return PlainTextResponse("done")


APP = Starlette(routes=[Route("/healthz", healthz), Route("/slow", slow)])


@contextmanager
def serving(**options: Any) -> Iterator[int]:
    sock = bind_socket("127.0.0.1", 0)
    server = HttpServer(APP, sock, **options)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while True:  # listening once uvicorn has started
            try:
                with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                    break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline, "the server never started listening"
                time.sleep(0.01)
        yield server.port
    finally:
        server.request_stop()
        thread.join(timeout=15)
        sock.close()
        assert not thread.is_alive(), "the server did not stop"


def get(port: int, path: str = "/healthz", timeout: float = 5.0) -> tuple[str, float]:
    """(status line, seconds taken) of one request on a fresh connection."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(4096):
            data += chunk
    return data.split(b"\r\n", 1)[0].decode(), time.monotonic() - started


def closed_by_server(conn: socket.socket, deadline: float) -> bool:
    """Whether the server closes ``conn`` before ``deadline`` (monotonic); reads what it sends."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        readable, _, _ = select.select([conn], [], [], remaining)
        if readable:
            try:
                if conn.recv(4096) == b"":
                    return True
            except ConnectionResetError:
                return True


def count_closed(conns: list[socket.socket], *, at_least: int, deadline: float) -> int:
    """How many of ``conns`` the server has closed, waiting until ``at_least`` are or ``deadline`` passes."""
    open_ones, closed = list(conns), 0
    while closed < at_least and (remaining := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select(open_ones, [], [], remaining)
        for conn in readable:
            try:
                gone = conn.recv(4096) == b""
            except ConnectionResetError:
                gone = True
            if gone:
                open_ones.remove(conn)
                closed += 1
    return closed


def test_many_idle_connections_cannot_starve_a_request() -> None:
    with serving(max_connections=20, request_timeout=60) as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        try:
            status, took = get(port)
            assert status == "HTTP/1.1 200 OK" and took < 2.0
            closed = count_closed(idle, at_least=80, deadline=time.monotonic() + 5)
            assert closed >= 80, f"only {closed} of 100 idle connections were closed to make room"
            assert not closed_by_server(idle[-1], time.monotonic() + 0.2)  # the newest stay open
        finally:
            for conn in idle:
                conn.close()


def test_a_silent_connection_is_closed_after_the_request_timeout() -> None:
    with serving(request_timeout=0.5) as port, socket.create_connection(("127.0.0.1", port)) as conn:
        opened = time.monotonic()
        assert closed_by_server(conn, opened + 5)
        assert time.monotonic() - opened >= 0.4


def test_trickling_headers_does_not_keep_a_connection_open() -> None:
    with serving(request_timeout=0.5, keep_alive_timeout=0.5) as port, socket.create_connection(
        ("127.0.0.1", port)
    ) as conn:
        opened = time.monotonic()
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n")
        closed = False
        for i in range(100):  # one header line every 50 ms, for at most 5 s
            try:
                conn.sendall(f"X-Slow-{i}: a\r\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_by_server(conn, time.monotonic() + 0.05):
                closed = True
                break
        assert closed, "a client trickling headers held its connection for 5 s"
        assert 0.4 <= time.monotonic() - opened < 3.0


def test_a_slow_handler_is_not_cut_off_and_keep_alive_ends_idle_clients() -> None:
    with serving(request_timeout=0.3, keep_alive_timeout=0.5) as port:
        status, took = get(port, "/slow")
        assert status == "HTTP/1.1 200 OK" and took >= 0.9
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")  # keep-alive: the server may hold it
            answered = time.monotonic()
            assert closed_by_server(conn, answered + 5)
            assert time.monotonic() - answered >= 0.2


def answer_to(port: int, request: bytes, timeout: float = 5.0) -> str:
    """The status line the server answers ``request`` (sent at once) with."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(request)
        data = b""
        while b"\r\n" not in data and (chunk := conn.recv(4096)):
            data += chunk
    return data.split(b"\r\n", 1)[0].decode()


def test_a_70_kb_request_line_is_refused() -> None:
    with serving() as port:
        status = answer_to(port, b"GET /healthz?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: test\r\n\r\n")
        assert status.split(" ")[1] in {"414", "431", "400"}, status
        assert get(port)[0] == "HTTP/1.1 200 OK"  # the server still answers the next one


def test_70_kb_of_headers_arriving_at_once_are_refused() -> None:
    headers = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"b" * 900) for i in range(78))
    with serving() as port:
        status = answer_to(port, b"GET /healthz HTTP/1.1\r\nHost: test\r\n" + headers + b"\r\n")
        assert status.split(" ")[1] in {"431", "400"}, status


def test_a_request_line_and_headers_under_the_limit_are_served() -> None:
    with serving() as port:
        status = answer_to(port, b"GET /healthz?" + b"a" * 8000 + b" HTTP/1.1\r\nHost: test\r\nX-Pad: "
                           + b"b" * 6000 + b"\r\nConnection: close\r\n\r\n")
        assert status == "HTTP/1.1 200 OK"
