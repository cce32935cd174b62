"""How many signed GitHub deliveries per second does the webhook route take, how fast does it answer, and
does the bot cast the votes as fast as it acknowledges them?

Not a test. Each target app runs in its own uvicorn process on 127.0.0.1;
this process drives it with 50 concurrent senders (aiohttp; ``--client httpx``
shows that client's own ceiling, which caps every target alike), each
POSTing a distinct signed ``issue_comment`` delivery (``/approve``, from the
real fixture payload), and prints deliveries/s, p50 and p99 latency, and the
ratio of each target to its baseline:

- ``bare``         a Starlette endpoint that only verifies ``X-Hub-Signature-256``;
- ``bare+fsync``   the same, plus a durable record (write + fsync) of each delivery id;
- ``route``        ``adapters.github.webhook.webhook_route`` with an in-memory dedupe and queue;
- ``route+fsync``  the route with its ``accept`` appending + fsyncing each delivery id (as the bot's store).

A real bot beside them (``--loopbot N``): ``loopbot serve`` on a temp state dir with a webhook
secret, a fake GitHub (tests/fakes/github_api.py, in its own process) and N demo loops whose
reviews wait on N issues; every delivery is a fresh ``/approve`` from one of the reviewers on
one of the open reviews (approvals_required is more than the reviewers, so they stay open).
After the run the bot is stopped and the store is checked: every acknowledged delivery (200
``{"votes": 1}``) must be recorded (``Store.record_deliveries``) and its vote's dedupe key kept on
its review - or, cast after the answer, its vote still queued with it (``pending_deliveries``)
when the stopping bot ran out of time to cast it. The bot keeps casting queued votes and answering
voters through its outbox (a reaction and a reply comment each) while the other targets are
measured: that work is part of what a real bot costs.

Casting is measured beside acknowledging: after each of the bot's turns the bench waits for its queue
to empty (the store's ``pending_deliveries``) and times it from the turn's last answer; votes cast per
second are those waiting at the turn's start plus those acknowledged in it, over the turn and its drain.
Targets (#19, #20) at 50 senders, printed as MET / MISSED lines: acknowledged >= 0.5x ``bare+fsync``
per second, p99 <= 100 ms, votes cast per second >= 0.8x deliveries acknowledged per second, and the
queue empty within 2 s of the last delivery.

Point it elsewhere:
    --loopbot N                                              ``loopbot serve`` with N open reviews (default 10; 0: none)
    --url http://127.0.0.1:8000/github/webhook --secret S   also an already running server (e.g. ``loopbot serve``)
    --app module:attr                                        also a Starlette app (or zero-argument factory)
    --only route,bare                                        a subset of the built-in targets ("" for none)
    --client httpx|aiohttp|both                              the senders' client (default both, one table each)

Ratios compare each target with its baseline (``route`` with ``bare``, ``route+fsync`` with
``bare+fsync``, ``--url`` / ``--app`` with ``bare``), measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import importlib
import importlib.util
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIXTURE = ROOT / "tests" / "fixtures" / "github" / "issue_comment.created.json"  # the repository's copy
SECRET = "bench-secret"
PATH = "/github/webhook"
CONCURRENCY = 50


# --- the apps under test (built in the server process) ------------------------------------------------
def _sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def _fsync_recorder(state_dir: str) -> Callable[[str], None]:
    handle = open(os.path.join(state_dir, "deliveries.log"), "ab")  # noqa: SIM115 - lives as long as the server
    lock = threading.Lock()

    def record(key: str) -> None:
        with lock:
            handle.write(key.encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    return record


def bare_app(state_dir: str, durable: bool = False) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    record = _fsync_recorder(state_dir) if durable else None

    async def endpoint(request: Request) -> Response:
        body = await request.body()
        if not hmac.compare_digest(_sign(body), request.headers.get("x-hub-signature-256", "")):
            return JSONResponse({"error": "signature"}, status_code=401)
        if record is not None:
            record(request.headers.get("x-github-delivery", ""))  # on the event loop, as protocols.md measured
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route(PATH, endpoint, methods=["POST"])])


def route_app(state_dir: str, durable: bool = False) -> Any:
    from starlette.applications import Starlette

    from adapters.github.webhook import webhook_route

    seen: set[str] = set()
    lock = threading.Lock()
    queue: list[Any] = []
    record = _fsync_recorder(state_dir) if durable else None

    def accept(key: str, replies: list[Any]) -> bool:
        with lock:
            if key in seen:
                return False
            seen.add(key)
        if record is not None:
            record(key)
        queue.extend(replies)
        return True

    return Starlette(routes=[webhook_route([SECRET], lambda batch: [accept(*each) for each in batch],
                                           bot_login="loopbot[bot]")])


BUILTIN: dict[str, Callable[[str], Any]] = {
    "bare": lambda d: bare_app(d),
    "bare+fsync": lambda d: bare_app(d, durable=True),
    "route": lambda d: route_app(d),
    "route+fsync": lambda d: route_app(d, durable=True),
}
BASELINE = {"route": "bare", "route+fsync": "bare+fsync", "loopbot": "bare+fsync"}


def _load_app(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    target = getattr(importlib.import_module(module), attr or "app")
    return target() if callable(target) and not hasattr(target, "router") else target


def serve(name: str, port: int, state_dir: str) -> None:
    import uvicorn

    app = _load_app(name[len("app="):]) if name.startswith("app=") else BUILTIN[name](state_dir)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --- the load ----------------------------------------------------------------------------------------------
class Deliveries:
    """Distinct signed deliveries made on demand from one template (a fresh comment id and delivery id each)."""

    def __init__(self) -> None:
        payload = json.loads(FIXTURE.read_text(encoding="utf-8"))
        payload["comment"]["id"] = "__ID__"
        payload["comment"]["body"] = "/approve bench-__N__"
        self.template = json.dumps(payload).encode()
        self.count = 0

    def answered(self, headers: dict[str, str], status: int) -> None:
        """What the target answered to the delivery sent with ``headers`` (kept by ``VoteDeliveries``)."""

    def turn_started(self) -> None:
        """A measured turn of this target begins (``VoteDeliveries`` counts the votes cast in it)."""

    def turn_ended(self, elapsed: float) -> None:
        """The measured turn that began last ended after ``elapsed`` seconds."""

    def __call__(self) -> tuple[bytes, dict[str, str]]:
        self.count += 1
        n = str(self.count).encode()
        body = self.template.replace(b'"__ID__"', b"1" + n).replace(b"__N__", n[-1:] or b"1")
        return body, {
            "Content-Type": "application/json", "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": str(uuid.uuid4()), "X-GitHub-Hook-ID": "1", "X-Hub-Signature-256": _sign(body),
        }


async def drive(url: str, make: Deliveries, seconds: float, client: str = "httpx") -> tuple[int, float, list[float]]:
    """CONCURRENCY senders POSTing fresh deliveries for ``seconds``: (failures, elapsed, latencies)."""
    latencies: list[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds

    async def run(post: Callable[[bytes, dict[str, str]], Any]) -> float:
        async def sender() -> None:
            nonlocal failures
            while time.perf_counter() < deadline:
                body, headers = make()
                started = time.perf_counter()
                status = await post(body, headers)
                latencies.append(time.perf_counter() - started)
                failures += status >= 300
                make.answered(headers, status)

        started = time.perf_counter()
        await asyncio.gather(*(sender() for _ in range(CONCURRENCY)))
        return time.perf_counter() - started

    if client == "aiohttp":
        import aiohttp

        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:

            async def post_aiohttp(body: bytes, headers: dict[str, str]) -> int:
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    return response.status

            elapsed = await run(post_aiohttp)
    else:
        import httpx

        limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
        async with httpx.AsyncClient(limits=limits, timeout=10) as http:

            async def post_httpx(body: bytes, headers: dict[str, str]) -> int:
                return (await http.post(url, content=body, headers=headers)).status_code

            elapsed = await run(post_httpx)
    return failures, elapsed, latencies


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, timeout: float = 15) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(url, content=b"{}", headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": _sign(b"{}")})
            return
        time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not start")


def summary(name: str, failures: int, elapsed: float, latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "target": name, "requests": len(latencies), "failures": failures, "per_s": len(latencies) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000, "p99_ms": ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1000,
    }


def measure_all(urls: dict[str, str], seconds: float, warmup: float, client: str, rounds: int,
                makers: dict[str, Deliveries] | None = None) -> dict[str, Any]:
    """Every target in turn, ``rounds`` times, so a neighbour's load drifting over the run hits all alike."""
    makers = {name: (makers or {}).get(name) or Deliveries() for name in urls}
    for name, url in urls.items():
        asyncio.run(drive(url, makers[name], warmup, client))
    totals: dict[str, tuple[int, float, list[float]]] = {name: (0, 0.0, []) for name in urls}
    for _ in range(rounds):
        for name, url in urls.items():
            makers[name].turn_started()
            failures, elapsed, latencies = asyncio.run(drive(url, makers[name], seconds / rounds, client))
            makers[name].turn_ended(elapsed)
            done = totals[name]
            totals[name] = (done[0] + failures, done[1] + elapsed, done[2] + latencies)
    return {name: summary(name if name != "url" else urls[name], *totals[name]) for name in urls}


@contextlib.contextmanager
def local_servers(names: list[str]) -> Iterator[dict[str, str]]:
    """One uvicorn process per target, all up at once; yields their webhook URLs."""
    servers: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as state_root:
        try:
            urls = {}
            for name in names:
                port = _free_port()
                state_dir = os.path.join(state_root, str(port))
                os.mkdir(state_dir)
                servers.append(subprocess.Popen(
                    [sys.executable, __file__, "--serve", name, "--port", str(port), "--state", state_dir,
                     "--secret", SECRET],
                    cwd=ROOT,
                ))
                urls[name] = f"http://127.0.0.1:{port}{PATH}"
            for url in urls.values():
                _wait_ready(url)
            yield urls
        finally:
            for server in servers:
                server.terminate()
            for server in servers:
                server.wait(10)


# --- a real loopbot serve ----------------------------------------------------------------------------------
BENCH_REPO = "octo/bench"
VOTERS = [f"voter{i}" for i in range(20)]


def fake_github(issues: int) -> None:
    """The fake GitHub REST server for ``--loopbot`` (in its own process): prints its base URL, serves until killed."""
    from tests.fakes.github_api import FakeGitHub

    class BenchGitHub(FakeGitHub):
        def _react(self, call: Any, repository: str, comment_id: str) -> tuple[int, Any, dict[str, str]]:
            # the bench's comments exist only in its deliveries: take reactions on any comment id
            content = (call.body or {}).get("content", "")
            return 201, {"id": self.new_id(), "node_id": "R", "user": self.user(self.bot_login), "content": content,
                         "created_at": "2026-01-01T00:00:00Z"}, {}

    fake = BenchGitHub().start()
    for number in range(1, issues + 1):
        fake.add_issue(BENCH_REPO, number, title=f"bench reviews {number}")
    print(fake.base_url, flush=True)
    threading.Event().wait()


class VoteDeliveries(Deliveries):
    """Fresh ``/approve`` comments from the reviewers on the open reviews' issues; remembers what was acknowledged."""

    def __init__(self, issues: dict[int, str], waiting: Callable[[], int], cpu: Callable[[], float]) -> None:
        super().__init__()
        self.waiting = waiting  # how many acknowledged deliveries wait to be cast, from the bot's store
        self.cpu = cpu  # CPU seconds the bot's process has used so far
        self.cpu_seconds = 0.0  # used during the measured turns and their drains
        self.turns_acknowledged = 0  # deliveries acknowledged during the measured turns
        self._cpu_at = 0.0
        self.cast = 0  # votes cast during the measured turns and their drains
        self.cast_seconds = 0.0
        self.drains: list[float | None] = []  # per turn: seconds until nothing waited (None: not within 30 s)
        self._turn: tuple[int, int] = (0, 0)  # (waiting, acknowledged) when the turn began
        payload = json.loads(FIXTURE.read_text(encoding="utf-8"))
        payload["repository"]["full_name"] = BENCH_REPO
        payload["issue"]["number"] = "__ISSUE__"
        payload["comment"]["id"] = "__ID__"
        payload["comment"]["body"] = "/approve"
        payload["comment"]["user"]["login"] = payload["sender"]["login"] = "__LOGIN__"
        # written now, as a live comment is: the bot's answer looks for its reply among the comments since then
        payload["comment"]["created_at"] = payload["comment"]["updated_at"] = "__AT__"
        self.template = json.dumps(payload).encode()
        self.issues = sorted(issues)
        self.review_of = issues
        self.sent: dict[str, tuple[str, int]] = {}  # delivery id -> (review id, comment id)
        self.acknowledged: list[tuple[str, str, int]] = []  # (delivery key, review id, comment id)
        self.refused = 0

    def __call__(self) -> tuple[bytes, dict[str, str]]:
        self.count += 1
        comment_id = 10_000_000 + self.count
        issue = self.issues[self.count % len(self.issues)]
        login = VOTERS[(self.count // len(self.issues)) % len(VOTERS)]
        body = (self.template.replace(b'"__ISSUE__"', str(issue).encode())
                .replace(b'"__ID__"', str(comment_id).encode()).replace(b"__LOGIN__", login.encode())
                .replace(b"__AT__", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()).encode()))
        delivery = str(uuid.uuid4())
        self.sent[delivery] = (self.review_of[issue], comment_id)
        return body, {
            "Content-Type": "application/json", "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": delivery, "X-GitHub-Hook-ID": "1", "X-Hub-Signature-256": _sign(body),
        }

    def turn_started(self) -> None:
        self._turn = (self.waiting(), len(self.acknowledged))
        self._cpu_at = self.cpu()

    def turn_ended(self, elapsed: float) -> None:
        waiting, acknowledged = self._turn
        drained = self.drained_after()
        self.drains.append(drained)
        self.cast += waiting + len(self.acknowledged) - acknowledged - self.waiting()
        self.cast_seconds += elapsed + (drained if drained is not None else 30.0)
        self.cpu_seconds += self.cpu() - self._cpu_at
        self.turns_acknowledged += len(self.acknowledged) - acknowledged

    def drained_after(self, limit: float = 30.0) -> float | None:
        """Seconds from now (the last delivery's answer) until nothing waits to be cast; None past ``limit``."""
        started = time.perf_counter()
        while self.waiting():
            if time.perf_counter() - started > limit:
                return None
            time.sleep(0.01)
        return time.perf_counter() - started

    def answered(self, headers: dict[str, str], status: int) -> None:
        delivery = headers["X-GitHub-Delivery"]
        review_id, comment_id = self.sent.pop(delivery)
        if status == 200:
            self.acknowledged.append((f"github:comment:{comment_id}", review_id, comment_id))  # the body's key
        else:
            self.refused += 1


LOOPBOT_CMD = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT_CMD[0]).exists():
    LOOPBOT_CMD = [sys.executable, "-m", "bot.cli"]


class RealBot:
    """``loopbot serve`` with N demo loops waiting on N issues of a fake GitHub (both subprocesses)."""

    def __init__(self, reviews: int, root: str) -> None:
        import yaml

        self.root = Path(root)
        self.state_dir = self.root / "state"
        self.fake = subprocess.Popen([sys.executable, __file__, "--fake-github", str(reviews)], cwd=ROOT,
                                     stdout=subprocess.PIPE, text=True)
        assert self.fake.stdout is not None
        base_url = self.fake.stdout.readline().strip()
        loops = [{
            "name": f"bench{n}", "pattern": "demo", "run_on_start": True,
            "review": {"post_to": [{"github": {"repository": BENCH_REPO, "issue": n}}],
                       "reviewers": {"github_users": VOTERS}, "approvals_required": len(VOTERS) + 1},
        } for n in range(1, reviews + 1)]
        config = {
            "state_dir": str(self.state_dir), "server": {"port": 0, "host": "127.0.0.1"},
            "scheduler": {"poll_interval": 0.5},
            "github": {"token": "ghp_bench", "base_url": base_url, "webhook_secret": SECRET},
            "loops": loops,
        }
        self.config = self.root / "config.yaml"
        self.config.write_text(yaml.safe_dump(config), encoding="utf-8")
        env = {**os.environ, "LOOPBOT_CONFIG": str(self.config), "PYTHONPATH": str(ROOT)}
        env.pop("PORT", None)
        self.log = open(self.root / "serve.log", "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([*LOOPBOT_CMD, "serve"], env=env, cwd=self.root, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self._port()}{PATH}"
        self.issues = self._open_reviews(reviews)
        from bot.store import SqliteStore

        self._store = SqliteStore(self.state_dir)

    def waiting(self) -> int:
        """Acknowledged deliveries whose votes the bot has not cast yet (read from its store)."""
        return len(self._store.pending_deliveries())

    def cpu(self) -> float:
        """CPU seconds (user + system) ``loopbot serve`` has used so far (Linux; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _port(self, timeout: float = 30) -> int:
        from bot.serve_lock import ServeLock

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"loopbot serve exited: {(self.root / 'serve.log').read_text()}")
            info = ServeLock.holder(self.state_dir)
            if info and info.get("pid") == self.proc.pid and info.get("port"):
                return int(info["port"])
            time.sleep(0.05)
        raise RuntimeError("loopbot serve did not bind a port")

    def _open_reviews(self, count: int, timeout: float = 60) -> dict[int, str]:
        """issue number -> the id of the open review posted there, once all ``count`` are posted."""
        from bot.store import SqliteStore

        store = SqliteStore(self.state_dir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            issues = {}
            for review in store.open_reviews():
                for post in review.posts:
                    data = post.get("data") or {}
                    if post.get("channel") == "github" and data.get("issue"):
                        issues[int(data["issue"])] = review.id
            if len(issues) == count:
                return issues
            time.sleep(0.1)
        raise RuntimeError(f"only {len(issues)} of {count} reviews were posted in {timeout}s")

    def stop(self) -> None:
        for proc in (self.proc, self.fake):
            if proc.poll() is None:
                proc.terminate()
        for proc in (self.proc, self.fake):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.log.close()

    def verify(self, made: VoteDeliveries) -> str:
        """Every acknowledged delivery recorded in the store, and its vote on its review (the bot stopped)."""
        from bot.store import SqliteStore

        store = SqliteStore(self.state_dir)
        kept = {review.id: set(review.delivery_keys) for review in store.list_reviews()}
        queued = {key for key, _work in store.pending_deliveries()}  # durable; the next start casts them
        missing_delivery = missing_vote = waiting = 0
        for key, review_id, comment_id in made.acknowledged:
            if store.record_deliveries([(key, None)])[0]:  # True: it was not recorded (now it is; the bench is over)
                missing_delivery += 1
            if key in queued:
                waiting += 1
            elif f"github:comment:{comment_id}" not in kept.get(review_id, set()):
                missing_vote += 1
        total = len(made.acknowledged)
        verdict = "OK" if not (missing_delivery or missing_vote) else "LOST"
        return (f"loopbot store check: {verdict}: {total} acknowledged deliveries, {missing_delivery} not recorded "
                f"as deliveries, {missing_vote} without their vote on the review and not queued, {waiting} still "
                f"queued at stop (recorded; cast at the next start); {made.refused} not acknowledged")


def main() -> None:
    global SECRET
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    parser.add_argument("--fake-github", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--loopbot", type=int, default=10, metavar="N",
                        help="a real `loopbot serve` with N open reviews to vote on (0: not measured)")
    parser.add_argument("--only", default=",".join(BUILTIN), help="built-in targets, comma-separated")
    parser.add_argument("--app", help="module:attr of a Starlette app (or factory) to serve and measure too")
    parser.add_argument("--url", help="an already running webhook URL to measure too (with --secret)")
    parser.add_argument("--secret", default=SECRET, help="webhook secret of --url's server")
    parser.add_argument("--client", choices=["httpx", "aiohttp", "both"], default="aiohttp",
                        help="the senders' HTTP client; httpx.AsyncClient stalls at 50 concurrent connections "
                             "(encode/httpx#3215), so aiohttp shows the servers' own limits")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per target")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds per target first")
    parser.add_argument("--rounds", type=int, default=3, help="targets measured in turn this many times")
    args = parser.parse_args()
    SECRET = args.secret
    if args.serve:
        serve(args.serve, args.port, args.state)
        return
    if args.fake_github:
        fake_github(args.fake_github)
        return
    clients = ["httpx", "aiohttp"] if args.client == "both" else [args.client]
    if "aiohttp" in clients and importlib.util.find_spec("aiohttp") is None:
        print("aiohttp is not installed (not a loopbot dependency): measuring with httpx only")
        clients = ["httpx"]
    names = [n for n in args.only.split(",") if n] + ([f"app={args.app}"] if args.app else [])
    with contextlib.ExitStack() as stack:
        bot: RealBot | None = None
        if args.loopbot:
            bot = RealBot(args.loopbot, stack.enter_context(tempfile.TemporaryDirectory()))
            stack.callback(bot.stop)
            print(f"loopbot serve at {bot.url} with {len(bot.issues)} open reviews")
        urls = stack.enter_context(local_servers(names))
        if args.url:
            urls["url"] = args.url
        makers: dict[str, Deliveries] = {}
        if bot is not None:
            urls["loopbot"] = bot.url
            makers["loopbot"] = VoteDeliveries(bot.issues, bot.waiting, bot.cpu)
        for client in clients:
            results = measure_all(urls, args.seconds, args.warmup, client, args.rounds, makers)
            report(client, args, results)
            if bot is not None:
                made = makers["loopbot"]
                assert isinstance(made, VoteDeliveries)
                targets(results, made)
        if bot is not None:
            bot.stop()
            made = makers["loopbot"]
            assert isinstance(made, VoteDeliveries)
            print(bot.verify(made))


def report(client: str, args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{CONCURRENCY} concurrent {client} senders, {args.seconds:.0f}s per target in {args.rounds} turns, "
          "signed issue_comment "
          f"deliveries (fixture payload, {len(Deliveries()()[0]):,} bytes)")
    print(f"{'target':<14} {'requests':>9} {'fail':>5} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8}  ratio")
    for name, row in results.items():
        baseline = BASELINE.get(name, "bare" if name not in BUILTIN else "")
        base = results.get(baseline)
        ratio = f"{row['per_s'] / base['per_s']:.2f}x {baseline} /s, " \
                f"{row['p99_ms'] / base['p99_ms']:.2f}x p99" if base else ""
        print(f"{row['target'][:14]:<14} {row['requests']:>9} {row['failures']:>5} {row['per_s']:>8.0f} "
              f"{row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f}  {ratio}")
    sys.stdout.flush()


def targets(results: dict[str, dict[str, Any]], made: VoteDeliveries) -> None:
    """The bot's figures against #19's and #20's targets."""
    met = {True: "MET", False: "MISSED"}
    bot, bare = results["loopbot"], results.get("bare+fsync")
    cast_per_s = made.cast / made.cast_seconds if made.cast_seconds else 0.0
    drained = None if None in made.drains else max(d for d in made.drains if d is not None)
    drains = ", ".join("over 30 s" if d is None else f"{d:.2f} s" for d in made.drains)
    print(f"loopbot: {bot['per_s']:.0f} deliveries acknowledged/s, {cast_per_s:.0f} votes cast/s "
          f"({made.cast} cast in {made.cast_seconds:.1f} s of turns and drains), p99 {bot['p99_ms']:.1f} ms, "
          f"queue empty after each turn's last delivery in {drains}; the bot's CPU "
          f"{made.cpu_seconds * 1000 / max(made.turns_acknowledged, 1):.2f} ms per acknowledged delivery")
    if bare is not None:
        ratio = bot["per_s"] / bare["per_s"]
        print(f"  acknowledged {ratio:.2f}x bare+fsync /s (target >= 0.5x): {met[ratio >= 0.5]}")
    print(f"  p99 {bot['p99_ms']:.1f} ms (target <= 100 ms): {met[bot['p99_ms'] <= 100]}")
    cast_ratio = cast_per_s / bot["per_s"] if bot["per_s"] else 0.0
    print(f"  cast {cast_ratio:.2f}x acknowledged /s (target >= 0.8x): {met[cast_ratio >= 0.8]}")
    emptied = drained is not None and drained <= 2.0
    print(f"  queue empty within 2 s of the last delivery (slowest turn): {met[emptied]}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
