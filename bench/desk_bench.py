"""The review desk at scale (issue #7): 10 vs 10,000 open reviews, real ``loopbot`` processes, one run.

Every figure is printed side by side with its target and MET/MISSED:

- idle ``loopbot serve``: CPU (utime+stime from /proc/<pid>/stat) over
  ``IDLE_SECONDS`` and RSS at the end, with 10,000 open reviews (+10,000
  archived reviews and ended runs) against the same with 10 - both servers
  run at once, so a busy machine slows them alike. Targets: CPU within 2x,
  RSS within 1.5x.
- ``serve`` ready (Popen until /healthz answers 200) <= 3 s;
  ``loopbot status`` <= 1 s and ``loopbot decide <id> approve`` <= 0.5 s
  (subprocess wall time, median of a few) - the targets apply at 10,000.
- ``SqliteStore.save_state`` of a 1,000-step state against the engine's own
  save (``encode_state`` + ``atomic_write_bytes``), alternated save by save:
  ratio <= 1.2.
- A vote that decides a review, until the run is resumed:
  * in process: ``VotePath.handle`` (publishing to ``Decisions``, which
    ``runner.apply_decided`` subscribes to, wired as ``serve`` wires it)
    from the call until the run record leaves "waiting"
    (``apply_outcome`` marks it "running" right before the engine continues
    from its snapshot; a store hook timestamps that write): p50 <= 50 ms.
    Also shown: until ``handle`` returns, and until the run is completed.
  * ``loopbot decide`` with ``serve`` up: from launching the command until
    the store shows the run "completed" (the demo loop ends right after its
    checkpoint): median <= 1 s.

The state dirs hold real runs and reviews (the built-in demo loop, paused at
its checkpoint, run in this process) plus synthetic copies of a real review
and run, put into loopbot.db in one transaction. The copies are of a posted
review, so ``serve``'s recovery finds them posted, as it would after a
restart.

Run: ``.venv/bin/python bench/desk_bench.py`` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import http.client
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.channel import Identity, Reply  # noqa: E402
from adapters.commands import Command  # noqa: E402
from bench.persistence_bench import big_state  # noqa: E402
from bot.config import load_config  # noqa: E402
from bot.desk import Authorizer, Decisions, ListMembership, People, ReviewDesk, VotePath, local_channel  # noqa: E402
from bot.runner import Runner, utcnow  # noqa: E402
from bot.review_records import Review  # noqa: E402
from bot.store import SqliteStore, RunRecord  # noqa: E402
from loop_engine.atomic import atomic_write_bytes  # noqa: E402
from loop_engine.review import HumanDecision  # noqa: E402
from loop_engine.serialization import encode_state  # noqa: E402

__all__ = ["main"]

LOOPBOT = [str(Path(sys.executable).with_name("loopbot"))]
if not Path(LOOPBOT[0]).exists():  # not installed as a script: run the module
    LOOPBOT = [sys.executable, "-m", "bot.cli"]

SCALES = {"10": 10, "10000": 10_000}
ARCHIVED = 10_000  # archived reviews and ended runs in the big state dir
CLI_DECIDES = 4  # real reviews decided with `loopbot decide` while serve is up
IDLE_SECONDS = 30.0
CLI_REPS = 3
IN_PROCESS_VOTES = 15
SAVE_PAIRS = 40

TARGETS = {
    "cpu": 2.0, "rss": 1.5, "ready": 3.0, "status": 1.0, "decide": 0.5, "save": 1.2, "vote_ms": 50.0,
    "decide_resumed": 1.0,
}


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


# -- state dirs ------------------------------------------------------------------------


def write_config(root: Path) -> Path:
    """Two loops of the built-in demo pattern: ``demo`` (real runs, overlap allowed) and ``bulk`` (copies)."""
    reviewers = {"reviewers": {"local": ["alice"]}}
    config = {
        "state_dir": str(root / "state"),
        "server": {"port": 0, "host": "127.0.0.1"},
        "loops": [
            {"name": "demo", "pattern": "demo", "overlap": "allow", "review": reviewers},
            {"name": "bulk", "pattern": "demo", "overlap": "allow", "review": reviewers},
        ],
    }
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def quiet_logging() -> None:
    logging.basicConfig(level=logging.WARNING)


def real_runs(config_path: Path, count: int) -> list[str]:
    """``count`` demo runs paused at their checkpoint, as a foreground `loopbot run` leaves them; their ids."""
    config = load_config(config_path, environ={})
    store = SqliteStore(config.state_dir)
    desk = ReviewDesk(store, {"local": local_channel(Path(config.state_dir))}, clock=utcnow, inline=True)
    runner = Runner(config, store, desk)
    ids = []
    for _ in range(count):
        run = runner.run_foreground("demo")
        assert run is not None and run.status == "waiting", run
        ids.append(run.id)
    return ids


def populate(state: Path, template_run: str, open_count: int, archived: int) -> None:
    """Copies of a real posted review and its waiting run (loop ``bulk``), and a long archived history."""
    store = SqliteStore(state)
    run = store.get_run(template_run)
    assert run.review_id is not None
    review_doc = store.get_review(run.review_id).to_dict()
    run_doc = run.to_dict()
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def review_copy(n: int, status: str) -> Review:
        created = (t0 + timedelta(seconds=n)).isoformat()
        return Review.from_dict({**review_doc, "id": f"bulk-{n}", "loop": "bulk", "run_id": f"bulk-run-{n}",
                                 "status": status, "created_at": created})

    def run_copy(n: int, status: str) -> RunRecord:
        created = (t0 + timedelta(seconds=n)).isoformat()
        return RunRecord.from_dict({**run_doc, "id": f"bulk-run-{n}", "loop": "bulk", "status": status,
                                    "created_at": created, "updated_at": created, "review_id": f"bulk-{n}"})

    total = open_count + archived
    store.put_records([run_copy(n, "waiting" if n <= open_count else "completed") for n in range(1, total + 1)],
                      [review_copy(n, "open" if n <= open_count else "applied") for n in range(1, total + 1)])
    store.raise_counter("bulk", total)
    store.raise_counter("bulk-run", total)
    store.close()


# -- processes -------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def healthz(port: int) -> int:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", "/healthz")
        code = conn.getresponse().status
        conn.close()
        return code
    except OSError:
        return 0


@dataclass
class Server:
    label: str
    root: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    ready_s: float = 0.0

    def start(self) -> None:
        started = time.perf_counter()
        log = open(self.root / "serve.log", "wb")  # noqa: SIM115 - the child keeps its copy
        self.proc = subprocess.Popen([*LOOPBOT, "serve"], env=self.env, cwd=self.root, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()
        lock = self.root / "state" / "serve.lock"
        deadline = started + 60
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"serve ({self.label}) exited {self.proc.returncode}:\n"
                                 + (self.root / "serve.log").read_text())
            if not self.port:
                try:
                    info = orjson.loads(lock.read_bytes())
                    if info.get("pid") == self.proc.pid and info.get("port"):
                        self.port = int(info["port"])
                except (OSError, ValueError):
                    pass
            if self.port and healthz(self.port) == 200:
                self.ready_s = time.perf_counter() - started
                return
            time.sleep(0.01)
        raise SystemExit(f"serve ({self.label}) was not ready within 60 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


def cli_seconds(root: Path, env: dict[str, str], *args: str, expected: int = 0) -> float:
    started = time.perf_counter()
    done = subprocess.run([*LOOPBOT, *args], env=env, cwd=root, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - started
    if done.returncode != expected:
        raise SystemExit(f"loopbot {' '.join(args)} exited {done.returncode}:\n{done.stderr.decode()}")
    return elapsed


def wait_completed(store: SqliteStore, run_id: str, timeout: float = 20.0) -> float:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if store.get_run(run_id).status == "completed":
            return time.perf_counter()
        time.sleep(0.005)
    raise SystemExit(f"run {run_id} did not complete within {timeout} s")


# -- in-process vote -------------------------------------------------------------------


class TimedStore(SqliteStore):
    """A SqliteStore that timestamps the moment a run leaves "waiting", and when it completes."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.resumed: dict[str, float] = {}
        self.completed: dict[str, threading.Event] = {}
        self.completed_at: dict[str, float] = {}

    def update_run(self, run_id: str, mutate: Callable[[RunRecord], Any]) -> Any:
        before: dict[str, str] = {}

        def timed(run: RunRecord) -> Any:
            before["status"] = run.status
            return mutate(run)

        result = super().update_run(run_id, timed)
        status = self.get_run(run_id).status
        now = time.perf_counter()
        if before.get("status") == "waiting" and status != "waiting":
            self.resumed.setdefault(run_id, now)
        if status == "completed":
            self.completed_at.setdefault(run_id, now)
            self.completed.setdefault(run_id, threading.Event()).set()
        return result


@dataclass
class VoteFigures:
    resumed_ms: list[float] = field(default_factory=list)
    handled_ms: list[float] = field(default_factory=list)
    completed_ms: list[float] = field(default_factory=list)


def in_process_votes(config_path: Path, count: int) -> VoteFigures:
    """Decide ``count`` fresh reviews through the one vote path, wired as serve wires it."""
    config = load_config(config_path, environ={})
    store = TimedStore(Path(config.state_dir))
    desk = ReviewDesk(store, {"local": local_channel(Path(config.state_dir))}, clock=utcnow)
    runner = Runner(config, store, desk)
    runs = [runner.run_foreground("demo") for _ in range(count)]
    desk.start()
    people = People()
    decisions = Decisions()
    decisions.subscribe(runner.apply_decided)
    votes = VotePath(store, Authorizer({"local": ListMembership("local")}, people), clock=utcnow, people=people,
                     decisions=decisions)
    figures = VoteFigures()
    try:
        time.sleep(0.5)  # the posts of the new reviews go out first, as they would have long before a vote
        for run in runs:
            assert run is not None and run.review_id is not None
            event = store.completed.setdefault(run.id, threading.Event())
            reply = Reply(Identity("local", "alice", "alice"), Command(HumanDecision.APPROVE, run.review_id),
                          review_id=run.review_id, via="bench")
            started = time.perf_counter()
            answer = votes.handle(reply)
            handled = time.perf_counter()
            assert answer.counted, answer
            if not event.wait(20):
                raise SystemExit(f"run {run.id} did not complete in process")
            figures.handled_ms.append((handled - started) * 1000)
            figures.resumed_ms.append((store.resumed[run.id] - started) * 1000)
            figures.completed_ms.append((store.completed_at[run.id] - started) * 1000)
    finally:
        runner.shutdown(5)
        desk.stop()
    return figures


# -- snapshot save ---------------------------------------------------------------------


def save_ratio(tmp: Path) -> tuple[float, float]:
    state = big_state()
    store = SqliteStore(tmp / "snap")
    engine_file = tmp / "engine" / "loop_state_bench.json"
    engine_file.parent.mkdir(parents=True, exist_ok=True)
    saves: dict[str, list[float]] = {"engine": [], "store": []}
    atomic_write_bytes(engine_file, encode_state(state))
    store.save_state("demo-run-1", state)
    for _ in range(SAVE_PAIRS):  # alternated one by one: fsync times drift with the neighbours' load
        start = time.perf_counter()
        atomic_write_bytes(engine_file, encode_state(state))
        middle = time.perf_counter()
        store.save_state("demo-run-1", state)
        saves["engine"].append((middle - start) * 1000)
        saves["store"].append((time.perf_counter() - middle) * 1000)
    assert store.load_state("demo-run-1") == state, "state did not round-trip"
    return statistics.median(saves["engine"]), statistics.median(saves["store"])


# -- the bench -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)  # --help; no options
    quiet_logging()
    began = time.perf_counter()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        servers: dict[str, Server] = {}
        decide_ids: dict[str, list[str]] = {}
        setup = time.perf_counter()
        for label, open_count in SCALES.items():
            root = tmp / label
            root.mkdir()
            config_path = write_config(root)
            real = CLI_DECIDES + (1 if open_count > CLI_DECIDES else 0)
            ids = real_runs(config_path, min(real, open_count))
            decide_ids[label] = ids[:CLI_DECIDES]
            synthetic = open_count - len(ids)
            populate(root / "state", ids[0], synthetic, ARCHIVED if open_count > 100 else 10)
            env = {**os.environ, "LOOPBOT_CONFIG": str(config_path), "LOOPBOT_USER": "alice",
                   "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
            env.pop("PORT", None)
            servers[label] = Server(label, root, env)
        setup_s = time.perf_counter() - setup
        counts = {label: SqliteStore(s.root / "state").counts() for label, s in servers.items()}
        try:
            for server in servers.values():  # one after the other: ready time is not shared
                server.start()
            time.sleep(3)  # past the index's settle time: what follows is the idle steady state
            before = {label: cpu_seconds(s.proc.pid) for label, s in servers.items() if s.proc}
            time.sleep(IDLE_SECONDS)
            cpu = {label: cpu_seconds(s.proc.pid) - before[label] for label, s in servers.items() if s.proc}
            rss = {label: rss_mb(s.proc.pid) for label, s in servers.items() if s.proc}
            status_s: dict[str, list[float]] = {label: [] for label in servers}
            for _ in range(CLI_REPS):
                for label, server in servers.items():
                    status_s[label].append(cli_seconds(server.root, server.env, "status"))
            decide_s: dict[str, list[float]] = {label: [] for label in servers}
            resumed_s: dict[str, list[float]] = {label: [] for label in servers}
            for label, server in servers.items():
                store = SqliteStore(server.root / "state")
                for run_id in decide_ids[label]:
                    review_id = store.get_run(run_id).review_id
                    assert review_id is not None
                    started = time.perf_counter()
                    decide_s[label].append(cli_seconds(server.root, server.env, "decide", review_id, "approve"))
                    resumed_s[label].append(wait_completed(store, run_id) - started)
            for server in servers.values():
                assert server.proc is not None and server.proc.poll() is None, f"serve {server.label} died"
        finally:
            for server in servers.values():
                server.stop()
        votes = {label: in_process_votes(s.root / "config.yaml", IN_PROCESS_VOTES) for label, s in servers.items()}
        engine_ms, store_ms = save_ratio(tmp)

    few, many = "10", "10000"

    def med(values: dict[str, list[float]], label: str) -> float:
        return statistics.median(values[label])

    def line(name: str, a: str, b: str, target: str, ok: bool) -> None:
        rows.append(f"  {name:<48} {a:>14} {b:>14}   {target:<26} {verdict(ok)}")

    cpu_ratio = cpu[many] / cpu[few] if cpu[few] else float("inf")
    rss_ratio = rss[many] / rss[few]
    line(f"idle serve CPU over {IDLE_SECONDS:.0f} s", f"{cpu[few]:.2f} s", f"{cpu[many]:.2f} s",
         f"ratio {cpu_ratio:.2f} <= {TARGETS['cpu']:g}", cpu_ratio <= TARGETS["cpu"])
    line("idle serve RSS", f"{rss[few]:.1f} MB", f"{rss[many]:.1f} MB",
         f"ratio {rss_ratio:.2f} <= {TARGETS['rss']:g}", rss_ratio <= TARGETS["rss"])
    ready = {label: s.ready_s for label, s in servers.items()}
    line("serve ready (/healthz 200)", f"{ready[few]:.2f} s", f"{ready[many]:.2f} s",
         f"<= {TARGETS['ready']:g} s", ready[many] <= TARGETS["ready"])
    line(f"loopbot status (median of {CLI_REPS})", f"{med(status_s, few):.2f} s", f"{med(status_s, many):.2f} s",
         f"<= {TARGETS['status']:g} s", med(status_s, many) <= TARGETS["status"])
    line(f"loopbot decide <id> approve (median of {CLI_DECIDES})", f"{med(decide_s, few):.2f} s",
         f"{med(decide_s, many):.2f} s", f"<= {TARGETS['decide']:g} s", med(decide_s, many) <= TARGETS["decide"])
    line("decide launched -> run completed (serve up)", f"{med(resumed_s, few):.2f} s",
         f"{med(resumed_s, many):.2f} s", f"<= {TARGETS['decide_resumed']:g} s",
         med(resumed_s, many) <= TARGETS["decide_resumed"])
    vote_few, vote_many = (statistics.median(votes[k].resumed_ms) for k in (few, many))
    line(f"in-process vote -> run resumed (p50 of {IN_PROCESS_VOTES})", f"{vote_few:.1f} ms", f"{vote_many:.1f} ms",
         f"<= {TARGETS['vote_ms']:g} ms", vote_many <= TARGETS["vote_ms"])
    for what, attr in (("handle() returned", "handled_ms"), ("run completed", "completed_ms")):
        a, b = (statistics.median(getattr(votes[k], attr)) for k in (few, many))
        rows.append(f"  {'  (in-process vote -> ' + what + ', p50)':<48} {a:>11.1f} ms {b:>11.1f} ms   (shown)")
    ratio = store_ms / engine_ms
    rows.append(f"  {'save of a 1,000-step state: engine / store':<48} {engine_ms:>11.2f} ms {store_ms:>11.2f} ms"
                f"   {'ratio ' + format(ratio, '.2f') + ' <= 1.2':<26} {verdict(ratio <= TARGETS['save'])}")

    print(f"desk bench: {counts[few]['open_reviews']} vs {counts[many]['open_reviews']} open reviews "
          f"(+{ARCHIVED:,} archived reviews and ended runs in the big one); setup {setup_s:.1f} s; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {LOOPBOT[0]}")
    print(f"  {'figure':<48} {'10 open':>14} {'10,000 open':>14}   {'target':<26} verdict")
    for row in rows:
        print(row)
    missed = sum(row.rstrip().endswith("MISSED") for row in rows)
    print(f"{'all targets MET' if not missed else f'{missed} target(s) MISSED'} "
          f"(bench took {time.perf_counter() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
