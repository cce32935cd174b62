"""What bot.http_guard relies on in uvicorn and h11, so a release that changes it fails here, by name.

The behaviour (timeouts, eviction, 414/431) is pinned end to end by
tests/bot/test_hardening_server.py; these say why the guard still exists.
"""

from __future__ import annotations

import asyncio
import inspect

import h11
import pytest
import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from bot.http_guard import MAX_HEAD, guarded_protocol


def test_uvicorn_still_has_no_public_timeout_for_a_request_still_arriving() -> None:
    """If a new option appears here, it may replace guarded_protocol's deadline: try it, then drop the subclass."""
    options = [name for name in inspect.signature(uvicorn.Config).parameters if "timeout" in name or "limit" in name]
    assert options == ["ws_ping_timeout", "limit_concurrency", "limit_max_requests", "limit_max_requests_jitter",
                       "timeout_keep_alive", "timeout_notify", "timeout_graceful_shutdown",
                       "timeout_worker_healthcheck"]


def test_uvicorn_s_h11_protocol_keeps_the_hooks_the_guard_overrides() -> None:
    hooks = {
        "connection_made": ["self", "transport"],
        "data_received": ["self", "data"],
        "on_response_complete": ["self"],
        "connection_lost": ["self", "exc"],
    }
    for name, parameters in hooks.items():
        assert list(inspect.signature(getattr(H11Protocol, name)).parameters) == parameters, name
    assert list(inspect.signature(H11Protocol).parameters) == ["config", "server_state", "app_state", "_loop"]


def test_uvicorn_s_h11_protocol_keeps_the_state_the_guard_reads() -> None:
    loop = asyncio.new_event_loop()
    try:
        state = ServerState()
        protocol = guarded_protocol(1.0, 1)(uvicorn.Config(Starlette()), state, {}, _loop=loop)
        assert isinstance(protocol, H11Protocol)
        assert isinstance(protocol.conn, h11.Connection)  # their_state tells a request in from one arriving
        assert protocol.connections is state.connections  # every open connection, for eviction
        assert protocol.loop is loop and "transport" in vars(protocol)
    finally:
        loop.close()


def test_h11_bounds_only_a_head_still_arriving_so_limit_head_checks_a_whole_one() -> None:
    """If h11 starts refusing a whole oversized head itself, limit_head's 414/431 may be h11's 431."""
    whole = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    whole.receive_data(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert isinstance(whole.next_event(), h11.Request)
    arriving = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    arriving.receive_data(b"GET /" + b"a" * 70_000)
    with pytest.raises(h11.RemoteProtocolError) as refused:  # what uvicorn's h11_max_incomplete_event_size sets
        arriving.next_event()
    assert refused.value.error_status_hint == 431
