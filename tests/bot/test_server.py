"""/healthz: counts while the store works, 503 naming the problem when it does not."""

from __future__ import annotations

import asyncio
import os
import socket
import shutil
from pathlib import Path

import pytest

from starlette.routing import Route
from starlette.responses import PlainTextResponse
from starlette.testclient import TestClient

from bot.health import health
from bot.http_server import bind_socket
from bot.server import create_app
from bot.service import Service

from .runtime_support import bench, db_execute, demo


def test_healthz_counts_runs_by_status_and_open_reviews(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    client = TestClient(create_app(b.store, b.config.state_dir))
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok", "runs": {"waiting": 1}, "open_reviews": 1, "decided_reviews": 0, "outbox_pending": 0,
    }


def test_healthz_is_503_when_the_state_dir_is_gone(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    client = TestClient(create_app(b.store, b.config.state_dir))
    shutil.rmtree(b.config.state_dir)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "unavailable" and "missing" in response.json()["error"]
    assert not b.config.state_dir.exists()  # the probe never recreates it


def test_healthz_names_a_corrupt_document_it_set_aside_and_serves_the_rest(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    db_execute(b.config.state_dir, "UPDATE runs SET doc = '{torn' WHERE key = 'demo-run-1'")
    code, body = health(b.store, b.config.state_dir)
    assert code == 200 and body["open_reviews"] == 1
    assert [problem.split(":")[0] for problem in body["problems"]] == ["runs/demo-run-1"]


def test_healthz_is_503_when_the_state_dir_is_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = bench(tmp_path, [demo()])
    state_dir = b.config.state_dir
    state_dir.mkdir(parents=True, exist_ok=True)
    real = os.statvfs

    def read_only(path: object) -> os.statvfs_result:
        result = real(path)  # type: ignore[arg-type]
        values = list(result)
        values[8] |= os.ST_RDONLY  # f_flag, as a read-only mount reports it (root passes access checks)
        return os.statvfs_result(values)

    monkeypatch.setattr(os, "statvfs", read_only)
    code, body = health(b.store, state_dir)
    assert code == 503 and "store unusable" in body["error"] and "read-only" in body["error"]


def test_healthz_writes_nothing(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    before = {p: p.stat().st_mtime_ns for p in b.config.state_dir.rglob("*")}
    for _ in range(3):
        assert health(b.store, b.config.state_dir)[0] == 200
    assert {p: p.stat().st_mtime_ns for p in b.config.state_dir.rglob("*")} == before


class StalledService(Service):
    """A tick that reports itself stuck; Service.problem itself is tested in test_service."""

    def problem(self) -> str | None:
        return "no tick has completed for 5m, more than 30s (a tick may be stuck)"


def test_healthz_is_503_with_the_reason_when_the_tick_is_unhealthy(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    service = StalledService(b.store, b.runner, clock=b.clock)
    response = TestClient(create_app(b.store, b.config.state_dir, service=service)).get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable", "error": "no tick has completed for 5m, more than 30s (a tick may be stuck)",
    }


def test_healthz_is_200_while_the_tick_is_healthy(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    b.runner.run_foreground("demo")
    service = Service(b.store, b.runner, clock=b.clock)
    service.start(60)  # one tick now, the next only after the test
    try:
        response = TestClient(create_app(b.store, b.config.state_dir, service=service)).get("/healthz")
    finally:
        service.stop()
    assert response.status_code == 200 and response.json()["status"] == "ok"


def test_channel_routes_plug_in_through_extra_routes(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])

    async def events(request: object) -> PlainTextResponse:
        return PlainTextResponse("slack")

    app = create_app(b.store, b.config.state_dir, extra_routes=[Route("/slack/events", events, methods=["POST"])])
    client = TestClient(app)
    assert client.post("/slack/events").text == "slack"
    assert client.post("/github/webhook").status_code == 404  # nothing mounted unless configured


def test_bind_socket_with_port_zero_reports_the_real_port() -> None:
    sock = bind_socket("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
    finally:
        sock.close()


async def test_connections_accepted_from_the_bound_socket_send_without_waiting_for_acks() -> None:
    """Nagle's algorithm off: a keep-alive answer written in two parts is not held for the client's delayed ACK."""
    sock = bind_socket("127.0.0.1", 0)
    sock.listen()
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            accepted.set_result(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
