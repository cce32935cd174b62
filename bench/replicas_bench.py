"""Replicas on one PostgreSQL (issue 11): vote throughput through 1 vs 3 replicas, and leader failover time.

Same run, same machine, real ``loopbot serve`` processes and a throwaway
PostgreSQL 15 cluster (tests/bot/store/pg_cluster.py):

- votes/s and p99 latency of Slack slash-command votes (signed as Slack
  signs them; the fake Slack Web API answers the bot; sent by ``bench.raw_http``,
  whose own CPU per vote is tens of µs, as a heavier sender's share of the
  cores would be taken from three replicas and not from one) sent round-robin
  to the replicas, on reviews that cannot be decided (every vote is a new
  voter's approval, counted under the review's row lock): SQLite (the
  default store) on one replica, PostgreSQL on one replica, PostgreSQL on
  three. Each case first takes ``--warmup`` votes unmeasured (its
  replicas' connections opened, statements prepared, the tables' first
  statistics gathered: a steady state, which is what a serving bot runs
  in). The cases are measured in rounds interleaved (the order reversed
  every other round), so a busy moment of a shared machine falls on each;
  every round is printed, then the medians and the median of the rounds'
  own ratios, which are the verdict (a round's cases share its moment);
- where the time goes: the CPUs each replica and the PostgreSQL server kept
  busy (utime + stime per second of voting); each replica's and the server's
  cost while idle (the fixed cost of ticks, heartbeats, leases and outbox
  polling, which three replicas pay three times); how many review rows were
  rewritten (PostgreSQL's table statistics: a vote that decides nothing
  writes its own rows, not its review's); the replicas' context switches
  per vote (wake-ups of a thread for a piece of work, preemptions by other
  processes); the machine's busy CPUs (one replica is bound by its own
  process and leaves cores idle; three fill them); and this process's CPU
  per vote, which is the same work in every case, so its growth beside three
  replicas is what sharing the cores costs every process's work. On a
  machine with few cores one replica's share bounds what three can add;
- three replicas' CPU per vote, step by step: in each round the one-replica
  case is measured again with a third of the votes in flight, which is what
  each of three replicas carries, alone on the machine (its other core
  idle). Against one replica at the full load that is the cost of a third
  of the load (smaller batches, and more sleeps per vote); three replicas
  against it, the cost of sharing the cores. And what waking costs on this
  machine by itself (``bench/wake_cost.py``: the same work back to back,
  and right after a sleep), measured while every case is idle;
- leader failover: kill -9 the leader (the replica /healthz names) ``--kills``
  times, time until a surviving replica's /healthz names another leader; the
  killed replica is started again each time (default ``election_interval``, 2 s).

Targets (issue 19): one PostgreSQL replica >= 0.8x SQLite's votes/s; three replicas >= one replica's votes/s, and
votes per busy CPU-second within 0.8x of one replica's. Failover max <= 30 s (issue 11).
Run: ``.venv/bin/python bench/replicas_bench.py [--votes 1200] [--rounds 5] [--warmup 400] [--idle 5] [--kills 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import psycopg  # noqa: E402
import yaml  # noqa: E402

from adapters.slack.listeners import WORKING_TEXT  # noqa: E402
from bot.serve_lock import ServeLock  # noqa: E402
from bench.raw_http import Connection, post_bytes  # noqa: E402
from bench import wake_cost  # noqa: E402
from bench.process_usage import busy, context_switches, machine_seconds  # noqa: E402
from tests.bot.store import pg_cluster  # noqa: E402
from tests.fakes.slack_api import FakeSlackApi, signed_headers, slash_command  # noqa: E402

LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
SECRET = "bench-secret"
CHANNEL = "C0BENCH"
REVIEWS = 20
VOTERS = [f"U{n:05d}" for n in range(1, 1201)]
CONCURRENCY = 32
_ids = itertools.count(1)


def _config(root: Path, fake: FakeSlackApi, store: dict[str, Any] | None) -> Path:
    loop = {"name": "demo", "pattern": "demo", "overlap": "allow",
            "review": {"post_to": [{"slack": {"channel": CHANNEL}}], "reviewers": {"slack_users": VOTERS},
                       "approvals_required": len(VOTERS)}}
    config: dict[str, Any] = {
        "state_dir": str(root / "state"), "server": {"port": 0, "host": "127.0.0.1"},
        "scheduler": {"poll_interval": 0.2}, "loops": [loop],
        "slack": {"bot_token": "xoxb-bench", "api_base_url": fake.base_url, "signing_secret": SECRET},
    }
    if store is not None:
        config["store"] = store
    path = root / "config.yaml"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


class Serve:
    def __init__(self, config: Path) -> None:
        self.config = config
        self.root = config.parent
        self.env = {**os.environ, "LOOPBOT_CONFIG": str(config), "PYTHONPATH": str(Path(__file__).parents[1])}
        for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "PORT"):
            self.env.pop(name, None)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> Serve:
        log = open(self.root / "serve.log", "ab")  # noqa: SIM115 - the child keeps its copy
        self.proc = subprocess.Popen([*LOOPBOT, "serve"], env=self.env, cwd=self.root, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited {self.proc.returncode}:\n{(self.root / 'serve.log').read_text()}")
            info = ServeLock.holder(self.root / "state")
            if info and info.get("pid") == self.proc.pid and info.get("port"):
                self.port = int(info["port"])
                try:
                    if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2).status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        raise SystemExit("serve was not ready within 60 s")

    def healthz(self) -> dict[str, Any]:
        return dict(httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5).json())

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _open_reviews(serves: list[Serve]) -> list[str]:
    """REVIEWS runs asked for through `loopbot run` (handed to a replica); their open reviews' ids."""
    first = serves[0]
    for _ in range(REVIEWS):
        done = subprocess.run([*LOOPBOT, "run", "demo"], env=first.env, cwd=first.root, capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"loopbot run failed: {done.stderr.decode()}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if first.healthz()["open_reviews"] >= REVIEWS:
            break
        time.sleep(0.2)
    else:
        raise SystemExit("the reviews did not open within 60 s")
    done = subprocess.run([*LOOPBOT, "status", "--json"], env=first.env, cwd=first.root, capture_output=True,
                          check=True)
    import json

    return [r["id"] for r in json.loads(done.stdout)["reviews"] if r["status"] == "open"][:REVIEWS]


def _request(review: str, user: str) -> bytes:
    """A signed slash-command vote, built before the clock starts."""
    body = slash_command(user, f"approve {review}", trigger_id=f"{next(_ids)}.{time.time_ns()}.bench",
                         channel=CHANNEL)
    return post_bytes("/slack/events", body.encode(), signed_headers(SECRET, body))


async def _votes(serves: list[Serve], reviews: list[str], count: int, first: int,
                 in_flight: int = CONCURRENCY) -> tuple[float, float, float]:
    """(votes/s, p99 ms, p50 ms), ``in_flight`` at once, sent by ``bench.raw_http``: tens of µs of CPU per
    vote, where aiohttp's 0.27-0.40 ms took from three replicas a share of the cores one replica never missed.
    Voters from ``first`` on: each vote is a new voter's."""
    jobs = iter([(serves[n % len(serves)].port,
                  _request(reviews[n % len(reviews)], VOTERS[first + n // len(reviews)])) for n in range(count)])
    latencies: list[float] = []

    async def worker() -> None:
        connections: dict[int, Connection] = {}
        try:
            for port, request in jobs:
                if port not in connections:
                    connections[port] = await Connection.open(port)
                started = time.perf_counter()
                status, text = await connections[port].send(request)
                latencies.append(time.perf_counter() - started)
                if status != 200 or (b"recorded" not in text and WORKING_TEXT.encode() not in text):
                    raise SystemExit(f"vote refused ({status}): {text[:300]!r}")  # working: told later
        finally:
            for connection in connections.values():
                connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    wall = time.perf_counter() - started
    latencies.sort()
    return count / wall, latencies[int(len(latencies) * 0.99) - 1] * 1000, statistics.median(latencies) * 1000


def _postgres_pids() -> list[int]:
    """The PostgreSQL server and its backends (the processes of the cluster's postmaster)."""
    data = pg_cluster._state.get("data")
    if data is None:
        return []
    postmaster = int((Path(str(data)) / "postmaster.pid").read_text().split()[0])
    found = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _review_writes(schema: str | None, *, settled: bool = False) -> int | None:
    """How many times ``schema``'s review rows have been updated (PostgreSQL's table statistics; None: SQLite).

    ``settled``: after a round, first wait for the backends to report it (they do at most once a second)."""
    if schema is None:
        return None
    if settled:
        time.sleep(1.5)
    with psycopg.connect(pg_cluster.url()) as conn:
        row = conn.execute("SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'reviews'",
                           (schema,)).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class Round:
    """One case's round: votes/s, latency, and the CPUs each replica and the PostgreSQL server kept busy."""

    rate: float
    p99: float
    p50: float
    replicas: list[float]
    postgres: float
    #: review rows rewritten per 1,000 votes (PostgreSQL): a vote that decides nothing leaves the row as it was
    rewrites: float | None = None
    #: the replicas' threads' context switches per vote: (waits, preemptions)
    switches: tuple[float, float] = (0.0, 0.0)
    #: CPU ms per vote of this process (signing and sending the votes: the same work in every case)
    driver: float = 0.0
    #: the machine's CPUs kept busy (of all it has) while voting
    machine: tuple[float, float] = (0.0, 0.0)

    @property
    def busy(self) -> float:
        return sum(self.replicas)

    @property
    def per_cpu(self) -> float:
        """Votes per busy CPU-second of the replicas."""
        return self.rate / self.busy if self.busy else 0.0


class Case:
    """Replicas on one store, started once and measured in rounds interleaved with the other cases."""

    def __init__(self, label: str, root: Path, fake: FakeSlackApi, store: dict[str, Any] | None,
                 replicas: int) -> None:
        self.label, self.engine = label, "postgres" if store else "sqlite"
        self.schema = store["schema"] if store else None
        self.serves = [Serve(_config(root / f"r{n}", fake, store)).start() for n in range(replicas)]
        self.reviews = _open_reviews(self.serves)
        self.rounds: list[Round] = []
        self.thirds: list[Round] = []  # one replica at a third of the votes in flight: what each of three carries
        self.idle: list[float] = []

    def _pids(self) -> list[int]:
        return [s.proc.pid for s in self.serves if s.proc is not None]

    def measure(self, votes: int, first: int, in_flight: int = CONCURRENCY) -> Round:
        """One round of ``votes`` (voters from ``first`` on), ``in_flight`` at once."""
        pids = self._pids()
        server = _postgres_pids() if self.engine == "postgres" else []
        written = _review_writes(self.schema)
        switched, driver, machine = context_switches(pids), time.process_time(), machine_seconds()
        mine, theirs, started = [busy([pid]) for pid in pids], busy(server), time.perf_counter()
        rate, p99, median = asyncio.run(_votes(self.serves, self.reviews, votes, first, in_flight))
        wall = time.perf_counter() - started
        driver = (time.process_time() - driver) * 1000 / votes
        used = [(now - then) / wall for now, then in zip(machine_seconds(), machine, strict=True)]
        spent = [(busy([pid]) - before) / wall for pid, before in zip(pids, mine, strict=True)]
        server_busy = (busy(server) - theirs) / wall
        waits, preempted = (now - then for now, then in zip(context_switches(pids), switched, strict=True))
        after = _review_writes(self.schema, settled=True)
        rewrites = None if written is None or after is None else (after - written) * 1000 / votes
        return Round(rate, p99, median, spent, server_busy, rewrites, (waits / votes, preempted / votes), driver,
                     (used[0], used[1]))

    def measure_idle(self, seconds: float) -> None:
        """Each replica's CPUs kept busy per second with nothing to do: its fixed cost."""
        pids = self._pids()
        before, started = [busy([pid]) for pid in pids], time.perf_counter()
        time.sleep(seconds)
        wall = time.perf_counter() - started
        self.idle = [(busy([pid]) - was) / wall for pid, was in zip(pids, before, strict=True)]

    def median(self, column: str) -> float:
        return statistics.median(getattr(row, column) for row in self.rounds)

    def stop(self) -> None:
        for serve in self.serves:
            serve.stop()


def failover(root: Path, fake: FakeSlackApi, store: dict[str, Any], kills: int) -> list[float]:
    serves = [Serve(_config(root / f"f{n}", fake, store)).start() for n in range(3)]
    times = []
    try:
        for _ in range(kills):
            pid = _leader_pid(serves)
            leader = next(s for s in serves if s.proc is not None and s.proc.pid == pid)
            others = [s for s in serves if s is not leader]
            leader.kill9()
            killed = time.monotonic()
            while True:
                new = _leader_pid(others)
                if new is not None and new != pid:
                    times.append(time.monotonic() - killed)
                    break
                if time.monotonic() - killed > 60:
                    raise SystemExit("no new leader within 60 s")
                time.sleep(0.02)
            leader.start()
    finally:
        for serve in serves:
            serve.stop()
    return times


def _leader_pid(serves: list[Serve]) -> int | None:
    for serve in serves:
        try:
            body = serve.healthz()
        except httpx.HTTPError:
            continue
        lead = next((r for r in body.get("replicas", []) if r["leader"]), None)
        if lead is not None:
            return int(lead["info"]["pid"])
    return None


def _idle_postgres(seconds: float) -> float:
    """The CPUs the PostgreSQL server kept busy per second while every case was idle."""
    server = _postgres_pids()
    before, started = busy(server), time.perf_counter()
    time.sleep(seconds)
    return (busy(server) - before) / (time.perf_counter() - started)


def _cpus(values: list[float]) -> str:
    return "+".join(f"{v:.2f}" for v in values)


def _split(one: Case, three: Case) -> None:
    """Three replicas' CPU per vote against one's, in two steps measured in the same rounds: each replica carries a
    third of the votes in flight (one replica alone at that load, the machine's other core idle: smaller batches),
    and three replicas share the cores with each other and the server (three at that load each)."""
    def per_vote(rows: list[Round]) -> tuple[float, float]:
        """(replica CPU ms, thread wake-ups) per vote, medians."""
        return (statistics.median(row.busy / row.rate * 1000 for row in rows),
                statistics.median(row.switches[0] for row in rows))

    (full, woke), (third, woke_third), (shared, woke_shared) = map(per_vote, (one.rounds, one.thirds, three.rounds))
    machine = statistics.median(row.machine[0] for row in one.thirds)
    print(f"  three replicas' CPU per vote, step by step: one replica {full:.2f} ms at {CONCURRENCY} in flight "
          f"({woke:.1f} wake-ups per vote); {third:.2f} ms ({third / full:.2f}x) alone at {CONCURRENCY // 3} in "
          f"flight, what each of three carries (smaller batches, each paying its round trips: "
          f"bench/cast_batch_bench.py; and {woke_third:.1f} wake-ups per vote; the machine {machine:.2f} CPUs busy); "
          f"{shared:.2f} ms ({shared / third:.2f}x) as three "
          f"at that load each, sharing {os.cpu_count()} cores with each other and PostgreSQL ({woke_shared:.1f} "
          f"wake-ups per vote)")


def _report(cases: list[Case], args: argparse.Namespace, idle_postgres: float, woken: list[str]) -> list[str]:
    """Print every round, the medians and where the time goes; the targets missed."""
    print(f"votes: {args.votes} Slack slash-command votes a round, {args.rounds} rounds interleaved (order reversed "
          f"every other round), {CONCURRENCY} in flight, {REVIEWS} open reviews, {os.cpu_count()} CPU(s)")
    for n in range(args.rounds):
        print(f"round {n + 1}:")
        for case in cases:
            row = case.rounds[n]
            print(f"  {case.label:<28} {row.rate:6.1f} votes/s   p99 {row.p99:7.1f} ms   replicas busy "
                  f"{_cpus(row.replicas)} CPU, PostgreSQL {row.postgres:.2f} CPU   {row.per_cpu:4.0f} votes/CPU-s"
                  + ("" if row.rewrites is None else f"   {row.rewrites:.0f} review rows rewritten per 1,000 votes"))
        third = cases[1].thirds[n]
        print(f"  {'  the same, ' + str(CONCURRENCY // 3) + ' in flight':<28} {third.rate:6.1f} votes/s   p99 "
              f"{third.p99:7.1f} ms   replica busy {third.busy:.2f} CPU, PostgreSQL {third.postgres:.2f} CPU   "
              f"{third.per_cpu:4.0f} votes/CPU-s")
        alone, shared = cases[1].rounds[n], cases[2].rounds[n]
        print(f"  3 vs 1 replica this round: {shared.rate / alone.rate:.2f}x votes/s, "
              f"{shared.per_cpu / alone.per_cpu:.2f}x votes per busy CPU-second")
    print("medians over the rounds:")
    for case in cases:
        each = ", ".join(f"{row.rate:.0f}" for row in case.rounds)
        spread = [statistics.median(row.replicas[i] for row in case.rounds) for i in range(len(case.serves))]
        print(f"  {case.label:<28} {case.median('rate'):7.1f} votes/s ({each})   p50 {case.median('p50'):6.1f} ms   "
              f"p99 {case.median('p99'):7.1f} ms   replicas busy {case.median('busy'):4.2f} CPU ({_cpus(spread)}), "
              f"PostgreSQL {case.median('postgres'):4.2f} CPU")
    sqlite, one, three = cases
    ratios = [t.rate / o.rate for o, t in zip(one.rounds, three.rounds, strict=True)]
    per_cpu = [t.per_cpu / o.per_cpu for o, t in zip(one.rounds, three.rounds, strict=True)]
    versus_sqlite = [o.rate / q.rate for q, o in zip(sqlite.rounds, one.rounds, strict=True)]
    print(f"  1 PostgreSQL replica / SQLite: {one.median('rate') / sqlite.median('rate'):.2f}x of the medians, "
          f"{statistics.median(versus_sqlite):.2f}x median of the rounds' (target >= 0.8x)")
    print(f"  3 replicas / 1 replica on PostgreSQL: {three.median('rate') / one.median('rate'):.2f}x of the medians, "
          f"{statistics.median(ratios):.2f}x median of the rounds' (target >= 1x)")
    print(f"  votes per busy CPU-second, 3 vs 1: {three.median('per_cpu'):.0f} vs {one.median('per_cpu'):.0f}: "
          f"{three.median('per_cpu') / one.median('per_cpu'):.2f}x of the medians, {statistics.median(per_cpu):.2f}x "
          f"median of the rounds' (target >= 0.8x)")
    print("where the time goes:")
    for case in (one, three):
        rate, busy, server = case.median("rate"), case.median("busy"), case.median("postgres")
        fixed = sum(case.idle)
        rewrites = statistics.median(row.rewrites or 0.0 for row in case.rounds)
        waits = statistics.median(row.switches[0] for row in case.rounds)
        preempted = statistics.median(row.switches[1] for row in case.rounds)
        driver = case.median("driver")
        machine = [statistics.median(row.machine[i] for row in case.rounds) for i in (0, 1)]
        print(f"  {case.label:<28} per vote {busy / rate * 1000:.2f} ms of replica CPU + {server / rate * 1000:.2f} ms "
              f"of PostgreSQL CPU; {rewrites:.0f} review rows rewritten per 1,000 votes (a vote that decides nothing "
              f"leaves its review's row); {waits:.1f} thread wake-ups and {preempted:.2f} preemptions per vote; "
              f"idle, the replicas cost {_cpus(case.idle)} CPU ({fixed / busy:.1%} of their busy CPU under votes); "
              f"the machine {machine[0]:.2f} of {machine[1]:.2f} CPUs busy; this process (signing and sending, the "
              f"same work in every case) {driver:.2f} ms of CPU per vote")
    _split(one, three)
    shared = three.median("driver") / one.median("driver")
    print(f"  sharing the cores: the same work per vote costs this process {shared:.2f}x the CPU beside three "
          f"replicas as beside one")
    print("  waking, on this machine (bench/wake_cost.py, every case idle): "
          + "; ".join(woken) + ". A replica pays it at each wake-up: the fewer votes it carries, the more per vote")
    print(f"  PostgreSQL idle (every case's replicas beating and polling): {idle_postgres:.3f} CPU")
    missed = []
    if statistics.median(versus_sqlite) < 0.8:
        missed.append("one PostgreSQL replica < 0.8x SQLite")
    if statistics.median(ratios) < 1:
        missed.append("three replicas < one")
    if statistics.median(per_cpu) < 0.8:
        missed.append("votes per busy CPU-second of three < 0.8x one's")
    return missed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=1200, help="votes per case and round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per case, interleaved")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds each case is measured idle")
    parser.add_argument("--warmup", type=int, default=400, help="votes per case before the rounds, not measured")
    parser.add_argument("--kills", type=int, default=10, help="kill -9 of the leader (0: no failover test)")
    args = parser.parse_args()
    voters = args.votes // REVIEWS + 1  # a round's, on each review
    if 2 * args.rounds * voters + args.warmup // REVIEWS + 1 > len(VOTERS):
        raise SystemExit(f"{args.rounds} rounds of {args.votes} votes and {args.warmup} to warm up need more than "
                         f"the {len(VOTERS)} voters")
    url = pg_cluster.url()
    cases: list[Case] = []
    with tempfile.TemporaryDirectory(prefix="replicas-bench-") as tmp, FakeSlackApi() as fake:
        root = Path(tmp)
        try:
            cases.append(Case("SQLite, 1 replica", root / "sqlite", fake, None, 1))
            for replicas in (1, 3):
                store = {"url": url, "schema": f"bench_votes_{replicas}"}
                cases.append(Case(f"PostgreSQL, {replicas} replica(s)", root / f"pg{replicas}", fake, store,
                                  replicas))
            idle_postgres = _idle_postgres(args.idle)
            for case in cases:
                case.measure_idle(args.idle)
            woken = wake_cost.lines(fake.base_url)  # the cases idle: what waking costs here, by itself
            for case in cases:  # unmeasured: each replica's connections open, statements prepared, tables analysed
                asyncio.run(_votes(case.serves, case.reviews, args.warmup, args.rounds * voters))
            thirds = args.rounds * voters + args.warmup // REVIEWS + 1  # the third-load rounds' voters from here on
            for n in range(args.rounds):  # interleaved, and reversed every other round: no case always goes first
                for case in cases if n % 2 == 0 else cases[::-1]:
                    case.rounds.append(case.measure(args.votes, n * voters))
                    if case is cases[1]:
                        case.thirds.append(case.measure(args.votes, thirds + n * voters, CONCURRENCY // 3))
        finally:
            for case in cases:
                case.stop()
        times = failover(root / "failover", fake, {"url": url, "schema": "bench_failover"}, args.kills)
    pg_cluster.stop()
    missed = _report(cases, args, idle_postgres, woken)
    if times:
        print(f"failover over {len(times)} kill -9 of the leader: median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s (target max <= 30 s)")
        if max(times) > 30:
            missed.append("failover over 30 s")
    print("targets: " + ("MISSED: " + "; ".join(missed) if missed else "all met"))
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
