"""How fast does ``/loopbot approve`` get its acknowledgement? p50/p99 latency and acks/s, 50 senders.

Servers measured side by side in this run, each in its own process:

- "serve": a real ``loopbot serve`` on a temp config whose ``slack:`` block
  points at a fake Slack Web API in this process, with ``--reviews`` demo
  loops run on start, so that many reviews are open (none can be decided:
  each needs more approvals than there are senders). Every vote walks the
  real path - signature, Bolt, the vote path, an fsynced store write - and
  is answered in the ack. Afterwards every acknowledged vote (its
  ``slack:command:<trigger_id>`` dedupe key) is looked up in the store.
- "bare": a Bolt ``AsyncApp`` whose ``/loopbot`` handler only acks - the floor.
- "adapter" (``--kinds serve,adapter,bare``): ``adapters.slack``'s app and
  route with a recording handler that appends a line per vote and fsyncs
  once per batch (``VoteBatches``): the adapter's own cost, durably.

Each gets the same warm-up and then ``--senders`` concurrent senders, each
sending ``--requests`` signed slash commands one after another (sender i's
n-th vote goes to review n mod ``--reviews``). They are measured in
interleaved rounds, so load from other processes falls on all; compare them
within one run.

``--target URL`` (repeatable) measures other endpoints instead, e.g. a
running ``loopbot serve``: ``--target http://127.0.0.1:8000/slack/events
--secret $SLACK_SIGNING_SECRET --review triage-17``.

Each line also gives the server's CPU per acknowledgement (user + system
seconds of its process over the load, from /proc; absent elsewhere): on
2 cores the sender takes one, so a server that needs twice bare Bolt's CPU
per ack gets about half its acks/s, and this figure moves far less with
the machine's load than acks/s do.

The last lines hold the issue's targets against the medians over the
rounds (a busy moment of the machine moves single rounds a lot).

Run: ``.venv/bin/python bench/slack_ack_bench.py`` (about a minute).
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
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SECRET = "bench-signing-secret"
BOT_TOKEN = "xoxb-bench"
CHANNEL = "C0BENCH"
KINDS = ("serve", "adapter", "bare")
#: In the ack of a vote the store counted ("approve from slack:U0001 recorded: 1 of 51 needed").
COUNTED_TEXT = " recorded: "


# --- the servers (run as `--serve adapter|bare` in a child process; "serve" is `loopbot serve` itself) ---------
def _serve(kind: str, port: int, api_base_url: str, record_dir: str) -> None:
    import uvicorn
    from slack_bolt.app.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient
    from starlette.applications import Starlette

    from adapters.channel import Answer, AnswerKind, Reply
    from adapters.slack.listeners import build_app
    from adapters.slack.route import slack_route

    if kind == "adapter":
        lock = threading.Lock()
        path = Path(record_dir) / f"votes-{os.getpid()}.jsonl"
        handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the server's life

        def record(replies: Sequence[Reply]) -> list[Answer | Exception]:
            lines = "".join(json.dumps({"voter": r.voter.qualified, "review": r.review_id, "key": r.dedupe_key}) + "\n"
                            for r in replies)
            with lock:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())
            return [Answer(AnswerKind.COUNTED, f"Counted: 1 of 2 approvals for {r.review_id}", r.review_id)
                    for r in replies]

        app = build_app(signing_secret=SECRET, handler=record, bot_token=BOT_TOKEN, api_base_url=api_base_url)
    else:
        app = AsyncApp(signing_secret=SECRET, client=AsyncWebClient(token=BOT_TOKEN, base_url=api_base_url))

        @app.command("/loopbot")
        async def noop(ack):  # type: ignore[no-untyped-def]
            await ack()

    server = Starlette(routes=[slack_route(app, signing_secret=SECRET)])
    uvicorn.run(server, host="127.0.0.1", port=port, log_level="warning", access_log=False, lifespan="off")


class LoopbotServe:
    """A real ``loopbot serve`` on a temp state dir: ``reviews`` demo loops, each paused at its review."""

    def __init__(self, root: Path, api_base_url: str, reviews: int, senders: int) -> None:
        import yaml

        self.root = root
        self.state_dir = root / "state"
        self.port = _free_port()
        voters = [_user(sender) for sender in range(senders)]  # named, so no vote waits on the channel's members
        loops = [{
            "name": f"bench{i}", "pattern": "demo", "run_on_start": True,
            "review": {"post_to": [{"slack": {"channel": CHANNEL}}], "approvals_required": senders + 1,
                       "reviewers": {"slack_users": voters}},
        } for i in range(reviews)]
        config = {
            "state_dir": str(self.state_dir), "server": {"host": "127.0.0.1", "port": self.port},
            "slack": {"bot_token": BOT_TOKEN, "signing_secret": SECRET, "api_base_url": api_base_url},
            "loops": loops,
        }
        self.config = root / "config.yaml"
        self.config.write_text(yaml.safe_dump(config), encoding="utf-8")
        self.log = root / "serve.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, expected: int, timeout: float = 60.0) -> list[str]:
        """Start, and return the ids of the ``expected`` open reviews once they all exist."""
        import httpx

        env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_") and k != "PORT"}
        env.update(LOOPBOT_CONFIG=str(self.config), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve"], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"loopbot serve exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                health = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).json()
                if health.get("open_reviews") == expected:
                    return sorted(r.id for r in self._store().open_reviews())
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise SystemExit(f"loopbot serve did not open {expected} reviews within {timeout:g}s:\n{self.log.read_text()}")

    def _store(self) -> Any:
        from bot.store import SqliteStore

        return SqliteStore(self.state_dir)

    def missing(self, keys: set[str], timeout: float = 30.0) -> set[str]:
        """Which of these dedupe keys are in no review of the store (waits for answers still in flight)."""
        deadline = time.monotonic() + timeout
        while True:
            stored: set[str] = set()
            for review in self._store().list_reviews():
                stored.update(review.delivery_keys)
            missing = keys - stored
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _user(sender: int) -> str:
    return f"U{sender:04d}"


# --- the load ------------------------------------------------------------------------------------
@dataclass
class Load:
    """One measured load: latencies, wall time, and the votes each 200 acknowledged."""

    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    failures: int = 0
    working: int = 0  # acks that said "working on it" (the answer followed through the response_url)
    counted: int = 0  # acks that said the vote was recorded (a refusal is acknowledged too, but counts nothing)
    acked: set[str] = field(default_factory=set)  # dedupe keys of acknowledged votes


def _body(sender: int, n: int, review: str, response_url: str) -> tuple[str, str]:
    trigger = f"{sender}.{n}.{time.time_ns()}"
    return trigger, urlencode({
        "token": "x", "team_id": "T0TEAM", "team_domain": "bench", "channel_id": CHANNEL, "channel_name": "ops",
        "user_id": _user(sender), "user_name": f"user{sender}", "command": "/loopbot",
        "text": f"approve {review}", "response_url": response_url, "trigger_id": trigger, "api_app_id": "A0APP",
    })


async def _load(url: str, secret: str, senders: int, requests: int, reviews: list[str], response_url: str,
                offset: int = 0) -> Load:
    import aiohttp
    from slack_sdk.signature import SignatureVerifier

    from adapters.slack.listeners import WORKING_TEXT

    verifier = SignatureVerifier(secret)
    load = Load()

    async def sender(session: aiohttp.ClientSession, index: int, count: int, first: int) -> None:
        for n in range(first, first + count):
            trigger, body = _body(index, n, reviews[n % len(reviews)], response_url)
            ts = str(int(time.time()))
            headers = {"content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": ts,
                       "x-slack-signature": verifier.generate_signature(timestamp=ts, body=body)}
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                raw = await response.read()
                ok = response.status == 200
            load.latencies.append(time.perf_counter() - started)
            if not ok:
                load.failures += 1
                continue
            load.acked.add(f"slack:command:{trigger}")
            text = raw.decode("utf-8", "replace")
            load.working += WORKING_TEXT in text
            load.counted += COUNTED_TEXT in text

    connector = aiohttp.TCPConnector(limit=senders)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(sender(session, i, 1, offset) for i in range(senders)))  # open the connections
        opening = load.acked
        load = Load(acked=set(opening))
        started = time.perf_counter()
        await asyncio.gather(*(sender(session, i, requests, offset + 1) for i in range(senders)))
        load.wall = time.perf_counter() - started
    return load


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux's /proc), or None where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (OSError, TypeError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(name: str, url: str, secret: str, senders: int, requests: int, reviews: list[str],
             response_url: str, offset: int, pid: int | None = None) -> tuple[str, set[str], Figures]:
    warm = asyncio.run(_load(url, secret, senders, 2, reviews, response_url, offset))  # auth.test, imports, conns
    cpu_before = _cpu_seconds(pid)
    load = asyncio.run(_load(url, secret, senders, requests, reviews, response_url, offset + 3))
    cpu_after = _cpu_seconds(pid)
    ordered = sorted(load.latencies)
    figures = Figures(len(ordered) / load.wall, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
                      ordered[-1] * 1000, load.failures, load.counted / load.wall)
    cpu = ("" if cpu_before is None or cpu_after is None
           else f"  cpu {(cpu_after - cpu_before) * 1e6 / max(1, len(ordered)):>5.0f} us/ack")
    line = (f"{name:<8} {len(ordered):>6} acks  {figures.per_s:>8.0f} acks/s  {figures.counted_per_s:>6.0f} counted/s  "
            f"p50 {statistics.median(ordered) * 1000:>6.1f} ms  p99 {figures.p99:>6.1f} ms  "
            f"max {figures.worst:>7.1f} ms  non-200 {load.failures}  working-acks {load.working}{cpu}  ({url})")
    return line, warm.acked | load.acked, figures


@dataclass(frozen=True)
class Figures:
    per_s: float
    p99: float  # ms
    worst: float  # ms
    failures: int
    counted_per_s: float  # acks that said "recorded" (bare counts nothing)


def _verdicts(rounds: dict[str, list[Figures]], all_stored: bool) -> list[str]:
    """The issue's targets for serve against bare, on the medians over the rounds."""
    serve, bare = rounds["serve"], rounds["bare"]
    per_s = statistics.median(f.per_s for f in serve) / statistics.median(f.per_s for f in bare)
    p99 = statistics.median(f.p99 for f in serve) / statistics.median(f.p99 for f in bare)
    worst = max(f.worst for f in serve)
    pairs = ", ".join(f"{s.per_s / b.per_s:.2f}x /s {s.p99 / b.p99:.2f}x p99" for s, b in zip(serve, bare, strict=True))
    met = {True: "MET", False: "MISSED"}
    return [
        f"serve vs bare, medians of {len(serve)} rounds (each round: {pairs}):",
        f"  throughput {per_s:.2f}x bare (target >= 0.5x): {met[per_s >= 0.5]}; counted in the ack "
        f"{statistics.median(f.counted_per_s for f in serve):.0f} votes/s",
        f"  p99 {p99:.2f}x bare (target <= 1.5x): {met[p99 <= 1.5]}",
        f"  slowest acknowledgement {worst:.0f} ms, {sum(f.failures for f in serve)} non-200 "
        f"(target: none over 3 s): {met[worst <= 3000 and not any(f.failures for f in serve)]}",
        f"  every acknowledged vote in the store: {met[all_stored]}",
    ]


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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the kinds")
    parser.add_argument("--reviews", type=int, default=10, help="open reviews in the real serve (one loop each)")
    parser.add_argument("--kinds", default="serve,bare", help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--target", action="append", default=[], help="measure this URL instead (repeatable)")
    parser.add_argument("--secret", default=SECRET, help="signing secret of --target")
    parser.add_argument("--review", default="triage-17", help="review id the --target votes name")
    parser.add_argument("--serve", choices=["adapter", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--api-base-url", help=argparse.SUPPRESS)
    parser.add_argument("--record-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port, args.api_base_url, args.record_dir)
        return
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")

    print(f"{args.senders} concurrent senders x {args.requests} signed `/loopbot approve` each, "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    if args.target:
        for url in args.target:
            print(_measure("target", url, args.secret, args.senders, args.requests, [args.review],
                           "https://hooks.slack.test/commands/1", 0)[0])
        return

    from tests.fakes.slack_api import FakeSlackApi

    children: list[subprocess.Popen[bytes]] = []
    serve: LoopbotServe | None = None
    with FakeSlackApi() as slack, tempfile.TemporaryDirectory() as tmp:
        try:
            urls: dict[str, str] = {}
            pids: dict[str, int | None] = {}
            reviews: dict[str, list[str]] = {}
            for kind in kinds:
                if kind == "serve":
                    serve = LoopbotServe(Path(tmp), slack.base_url, args.reviews, args.senders)
                    reviews[kind] = serve.start(args.reviews)
                    urls[kind] = f"http://127.0.0.1:{serve.port}/slack/events"
                    pids[kind] = serve.proc.pid if serve.proc else None
                    print(f"serve: loopbot serve (pid {serve.proc.pid if serve.proc else '?'}) with "
                          f"{len(reviews[kind])} open reviews")
                    continue
                port = _free_port()
                env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
                children.append(subprocess.Popen(
                    [sys.executable, __file__, "--serve", kind, "--port", str(port),
                     "--api-base-url", slack.base_url, "--record-dir", tmp], env=env))
                _wait_listening(port)
                urls[kind] = f"http://127.0.0.1:{port}/slack/events"
                pids[kind] = children[-1].pid
                reviews[kind] = ["triage-17"]
            acked: dict[str, set[str]] = {kind: set() for kind in urls}
            measured: dict[str, list[Figures]] = {}
            offset = 0
            for _round in range(args.rounds):  # interleaved, so a busy moment of the machine hits all
                for kind, url in urls.items():
                    line, keys, figures = _measure(kind, url, SECRET, args.senders, args.requests, reviews[kind],
                                                   slack.response_url, offset, pids[kind])
                    acked[kind] |= keys
                    measured.setdefault(kind, []).append(figures)
                    print(line)
                offset += args.requests + 3
            if "adapter" in urls:
                recorded = sum(len(p.read_text().splitlines()) for p in Path(tmp).glob("votes-*.jsonl"))
                print(f"adapter's handler recorded {recorded} votes durably (one fsync per batch)")
            if serve is not None:
                missing = serve.missing(acked["serve"])
                verdict = "all in the store" if not missing else f"{len(missing)} MISSING from the store"
                print(f"serve acknowledged {len(acked['serve'])} votes: {verdict}")
                if missing:
                    print("  e.g. " + ", ".join(sorted(missing)[:5]))
                if "bare" in measured:
                    print("\n".join(_verdicts(measured, not missing)))
                if missing:
                    raise SystemExit(1)
        finally:
            for child in children:
                child.terminate()
                child.wait(10)
            if serve is not None:
                serve.stop()


if __name__ == "__main__":
    main()
