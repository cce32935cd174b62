"""How fast does ``/loopbot approve`` get its acknowledgement? p50/p99 latency and acks/s, 50 senders.

Two servers run side by side in this run, each a real uvicorn in its own
process: "loopbot" is ``adapters.slack``'s app and route with a recording
vote handler that makes a small durable write (append + fsync a line, in a
worker thread) before answering; "bare" is a Bolt ``AsyncApp`` whose
``/loopbot`` handler only acks - the floor. Both talk to a fake Slack Web
API on 127.0.0.1 (for Bolt's ``auth.test``). Each gets the same warm-up and
then ``--senders`` concurrent senders, each sending ``--requests`` signed
slash commands one after another.

``--target URL`` (repeatable) measures other endpoints instead, e.g. a
running ``loopbot serve``: ``--target http://127.0.0.1:8000/slack/events
--secret $SLACK_SIGNING_SECRET``.

The two are measured in interleaved rounds, so load from other processes
on the machine falls on both; compare them within one run.

Run: ``.venv/bin/python bench/slack_ack_bench.py`` (about 30-50 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SECRET = "bench-signing-secret"
BOT_TOKEN = "xoxb-bench"


# --- the servers (run as `--serve loopbot|bare` in a child process) -----------------------------
def _serve(kind: str, port: int, api_base_url: str, record_dir: str) -> None:
    import uvicorn
    from slack_bolt.app.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient
    from starlette.applications import Starlette

    from adapters.channel import Answer, AnswerKind, Reply
    from adapters.slack.intake import build_app
    from adapters.slack.route import slack_route

    if kind == "loopbot":
        lock = threading.Lock()
        path = Path(record_dir) / f"votes-{os.getpid()}.jsonl"
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the server's life

        def record(reply: Reply) -> Answer:
            line = json.dumps({"voter": reply.voter.qualified, "review": reply.review_id, "key": reply.dedupe_key})
            with lock:
                handle.write(line + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            return Answer(AnswerKind.COUNTED, f"Counted: 1 of 2 approvals for {reply.review_id}", reply.review_id)

        app = build_app(signing_secret=SECRET, handler=record, bot_token=BOT_TOKEN, api_base_url=api_base_url)
    else:
        app = AsyncApp(signing_secret=SECRET, client=AsyncWebClient(token=BOT_TOKEN, base_url=api_base_url))

        @app.command("/loopbot")
        async def noop(ack):  # type: ignore[no-untyped-def]
            await ack()

    server = Starlette(routes=[slack_route(app)])
    uvicorn.run(server, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


# --- the load ------------------------------------------------------------------------------------
def _body(sender: int, n: int) -> str:
    return urlencode({
        "token": "x", "team_id": "T0TEAM", "team_domain": "bench", "channel_id": "C0REVIEW", "channel_name": "ops",
        "user_id": f"U{sender:04d}", "user_name": f"user{sender}", "command": "/loopbot",
        "text": "approve triage-17", "response_url": "https://hooks.slack.test/commands/1",
        "trigger_id": f"{sender}.{n}.{time.time_ns()}", "api_app_id": "A0APP",
    })


async def _load(url: str, secret: str, senders: int, requests: int) -> tuple[list[float], float, int]:
    import aiohttp
    from slack_sdk.signature import SignatureVerifier

    verifier = SignatureVerifier(secret)
    latencies: list[float] = []
    failures = 0

    async def sender(session: aiohttp.ClientSession, index: int, count: int) -> None:
        nonlocal failures
        for n in range(count):
            body = _body(index, n)
            ts = str(int(time.time()))
            headers = {"content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": ts,
                       "x-slack-signature": verifier.generate_signature(timestamp=ts, body=body)}
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    failures += 1
            latencies.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(limit=senders)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(sender(session, i, 1) for i in range(senders)))  # open the connections
        latencies.clear()
        failures = 0
        started = time.perf_counter()
        await asyncio.gather(*(sender(session, i, requests) for i in range(senders)))
        wall = time.perf_counter() - started
    return latencies, wall, failures


def _measure(name: str, url: str, secret: str, senders: int, requests: int) -> str:
    asyncio.run(_load(url, secret, senders, 2))  # warm the server (auth.test, imports, connections)
    latencies, wall, failures = asyncio.run(_load(url, secret, senders, requests))
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return (f"{name:<8} {len(ordered):>6} acks  {len(ordered) / wall:>8.0f} acks/s  p50 {p50:>6.1f} ms  "
            f"p99 {p99:>6.1f} ms  non-200 {failures}  ({url})")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the server on port {port} did not start within {timeout:g}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--senders", type=int, default=50)
    parser.add_argument("--requests", type=int, default=60, help="requests per sender")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds of loopbot then bare")
    parser.add_argument("--target", action="append", default=[], help="measure this URL instead (repeatable)")
    parser.add_argument("--secret", default=SECRET, help="signing secret of --target")
    parser.add_argument("--serve", choices=["loopbot", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--api-base-url", help=argparse.SUPPRESS)
    parser.add_argument("--record-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port, args.api_base_url, args.record_dir)
        return

    print(f"{args.senders} concurrent senders x {args.requests} signed `/loopbot approve` each, "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    if args.target:
        for url in args.target:
            print(_measure("target", url, args.secret, args.senders, args.requests))
        return

    from tests.fakes.slack_api import FakeSlackApi

    children: list[subprocess.Popen[bytes]] = []
    with FakeSlackApi() as slack, tempfile.TemporaryDirectory() as record_dir:
        try:
            urls = {}
            for kind in ("loopbot", "bare"):
                port = _free_port()
                env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
                children.append(subprocess.Popen(
                    [sys.executable, __file__, "--serve", kind, "--port", str(port),
                     "--api-base-url", slack.base_url, "--record-dir", record_dir], env=env))
                _wait_listening(port)
                urls[kind] = f"http://127.0.0.1:{port}/slack/events"
            for _round in range(args.rounds):  # interleaved, so a busy moment of the machine hits both
                for kind, url in urls.items():
                    print(_measure(kind, url, SECRET, args.senders, args.requests))
            recorded = sum(len(p.read_text().splitlines()) for p in Path(record_dir).glob("votes-*.jsonl"))
            print(f"loopbot's handler recorded {recorded} votes durably (fsync each)")
        finally:
            for child in children:
                child.terminate()
                child.wait(10)


if __name__ == "__main__":
    main()
