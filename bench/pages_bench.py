"""The pages and /metrics at scale (issue #21), over real HTTP, beside a bare Starlette app in the same run.

Figures, each a median of ``ROUNDS`` requests on one keep-alive connection,
printed with its target and MET/MISSED:

- ``GET /reviews/{id}`` of a review whose proposal has 5,000 table rows: <= 50 ms.
- ``GET /`` (the dashboard) with 10,000 open reviews: <= 50 ms.
- ``GET /metrics`` with 10,000 open reviews: <= 20 ms; and its ratio to the
  same scrape with 10 open reviews (the scrape must not grow with them).
- The dashboard's failing deliveries at 5,000 outbox tasks pending, 3 of them
  failing: the store's ``failing_tasks`` against reading every pending task
  (what the page did before), <= 0.2x; and ``GET /`` there against the same
  page with 10 pending (3 failing), <= 2x. What is left of the growth is the
  database's one scan of the outbox documents (no task is decoded but the
  ones shown); an index on the failing tasks would remove it.
- The bare Starlette app answering a static page of the same size as the
  review page, on the same machine in the same run: the floor every ratio
  is measured against (uvicorn, HTTP and the socket, without loopbot).

The stores are filled through the ``Store`` protocol's public methods
(``put_review``, ``put_run``, ``add_task``), so the bench runs on whichever store
``open_store`` gives this config. Run: ``.venv/bin/python bench/pages_bench.py``.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.config import BotConfig, load_config  # noqa: E402
from bot.review_records import Review, ReviewPolicy, Reviewers  # noqa: E402
from bot.http_server import bind_socket  # noqa: E402
from bot.server import create_app  # noqa: E402
from bot.store.base import OutboxTask, Store  # noqa: E402
from bot.store.open import open_store  # noqa: E402
from bot.web.metrics import Metrics  # noqa: E402
from bot.web.pages import review_links, web_routes  # noqa: E402
from loop_engine.proposal import Proposal, Table  # noqa: E402
from loop_engine.review import CheckpointTrigger, ReviewRequest  # noqa: E402

__all__ = ["main"]

ROUNDS = 40
ROWS = 5_000
#: Outbox tasks pending in the backlog bench, and which of them have failed.
BACKLOG = 5_000
FAILING = (10, 2_500, 4_999)
TOKEN = "bench-operator-token-0123456789"
SECRET = "bench-signing-secret-0123456789"
NOW = datetime.now(UTC)


def _config(root: Path) -> BotConfig:
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump({
        "state_dir": str(root / "state"),
        "loops": [{"name": "demo", "pattern": "demo", "schedule": {"cron": "0 9 * * *"}}],
        "web": {"secret": SECRET, "token": TOKEN, "base_url": "https://bot.example.com"},
    }), encoding="utf-8")
    return load_config(path, environ={})


def _review(n: int, rows: int) -> Review:
    proposal = Proposal(summary=f"Approve to apply {rows} label changes", sections=[Table(
        columns=["Issue", "Title", "Label", "Why"],
        rows=[[f"#{i}", f"Crash when saving file {i}", "P1" if i % 3 else "P2", f"matched rule {i % 17}"]
              for i in range(rows)],
    )]) if rows else None
    request = ReviewRequest(checkpoint_id=f"checkpoint_{n}", trigger=CheckpointTrigger.ON_PLAN_COMPLETE,
                            proposed_action="apply the labels", timestamp=NOW, proposal=proposal)
    return Review(id=f"demo-{n}", loop="demo", run_id=f"demo-run-{n}", checkpoint_id=request.checkpoint_id,
                  request=request.to_dict(), created_at=NOW - timedelta(seconds=100_000 - n),
                  policy=ReviewPolicy(reviewers=Reviewers(local=["alice"]), decide_after=timedelta(days=2)))


def _filled(root: Path, open_reviews: int) -> tuple[BotConfig, Store]:
    config = _config(root)
    store = open_store(config)
    store.put_review(_review(0, ROWS))
    for n in range(1, open_reviews):
        store.put_review(_review(n, 0))
    return config, store


def _backlog(root: Path, pending: int) -> tuple[BotConfig, Store]:
    """10 open reviews and ``pending`` outbox tasks, those in ``FAILING`` (and the last few) failing."""
    config, store = _filled(root, 10)
    failing = set(FAILING) if pending > max(FAILING) else set(range(pending - len(FAILING), pending))
    for n in range(pending):
        store.add_task(OutboxTask(id=f"demo-{n}.post.slack-c{n}", channel="slack", action="post",
                                  review_id=f"demo-{n}", payload={"target": {"slack": {"channel": f"C{n}"}}},
                                  created_at=NOW + timedelta(seconds=n), attempts=3 if n in failing else 0,
                                  last_error="channel_not_found" if n in failing else None))
    return config, store


@contextmanager
def _served(app: Starlette) -> Iterator[http.client.HTTPConnection]:
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    connection = http.client.HTTPConnection("127.0.0.1", sock.getsockname()[1], timeout=30)
    try:
        yield connection
    finally:
        connection.close()
        server.should_exit = True
        thread.join(10)
        sock.close()


def _median_ms(connection: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> tuple[float, int]:
    times, size = [], 0
    for round_ in range(ROUNDS + 3):
        start = time.perf_counter()
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - start
        if response.status != 200:
            raise SystemExit(f"GET {path} answered {response.status}: {body[:200]!r}")
        size = len(body)
        if round_ >= 3:  # the first few warm the templates and the store's caches
            times.append(elapsed * 1000)
    return statistics.median(times), size


def _call_ms(store: Store, call: Callable[[Store], object]) -> tuple[float, int]:
    """The median of ``ROUNDS`` calls of ``call(store)`` in this thread, after a few to warm the caches."""
    times = []
    for round_ in range(ROUNDS + 3):
        start = time.perf_counter()
        call(store)
        if round_ >= 3:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), 0


def _app(config: BotConfig, store: Store) -> Starlette:
    metrics = Metrics(store, lambda: datetime.now(UTC))
    routes = web_routes(config, store, clock=lambda: datetime.now(UTC), metrics=metrics)
    return create_app(store, config.state_dir, routes, metrics=metrics)


def _line(what: str, value: float, target: float | None, floor: float) -> str:
    verdict = "" if target is None else (f"  target <= {target:g} ms  " + ("MET" if value <= target else "MISSED"))
    return f"{what:<44} {value:8.2f} ms  ({value / floor:5.1f}x the bare app){verdict}"


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)  # --help; no options
    operator = {"Authorization": f"Bearer {TOKEN}"}
    with tempfile.TemporaryDirectory() as big_dir, tempfile.TemporaryDirectory() as small_dir:
        started = time.perf_counter()
        big_config, big = _filled(Path(big_dir), 10_000)
        small_config, small = _filled(Path(small_dir), 10)
        print(f"filled the stores in {time.perf_counter() - started:.1f} s "
              f"({big.counts()['open_reviews']} and {small.counts()['open_reviews']} open reviews)")
        links = review_links(big_config, lambda: datetime.now(UTC))
        assert links is not None
        review_path = links.url("demo-0").removeprefix("https://bot.example.com")
        results: dict[str, tuple[float, int]] = {}
        with _served(_app(big_config, big)) as connection:
            results["review"] = _median_ms(connection, review_path, {})
            results["dashboard"] = _median_ms(connection, "/", operator)
            results["metrics"] = _median_ms(connection, "/metrics", operator)
        with _served(_app(small_config, small)) as connection:
            results["metrics10"] = _median_ms(connection, "/metrics", operator)
    with tempfile.TemporaryDirectory() as backlog_dir, tempfile.TemporaryDirectory() as few_dir:
        backlog_config, backlog_store = _backlog(Path(backlog_dir), BACKLOG)
        for key, (config, store) in (("backlog", (backlog_config, backlog_store)),
                                     ("backlog10", _backlog(Path(few_dir), 10))):
            with _served(_app(config, store)) as connection:
                results[key] = _median_ms(connection, "/", operator)
        results["read every task"] = _call_ms(backlog_store, lambda store: store.pending_tasks())
        results["failing_tasks"] = _call_ms(backlog_store, lambda store: store.failing_tasks(50))
        page = "<!doctype html><title>static</title>" + "x" * max(0, results["review"][1] - 40)

        async def static(request: Request) -> HTMLResponse:
            return HTMLResponse(page)

        with _served(Starlette(routes=[Route("/", static)])) as connection:
            results["bare"] = _median_ms(connection, "/", {})
    floor = results["bare"][0]
    print(f"{'bare Starlette, a static page of the same size':<44} {floor:8.2f} ms  "
          f"({results['bare'][1] // 1024} KiB)")
    print(_line(f"GET /reviews/{{id}}, {ROWS:,} rows ({results['review'][1] // 1024} KiB)", results["review"][0],
                50, floor))
    print(_line("GET / at 10,000 open reviews", results["dashboard"][0], 50, floor))
    print(_line("GET /metrics at 10,000 open reviews", results["metrics"][0], 20, floor))
    print(_line("GET /metrics at 10 open reviews", results["metrics10"][0], None, floor))
    ratio = results["metrics"][0] / results["metrics10"][0]
    print(f"{'/metrics at 10,000 against at 10':<44} {ratio:8.2f}x  target <= 1.5x  "
          + ("MET" if ratio <= 1.5 else "MISSED"))
    every, failing = results["read every task"][0], results["failing_tasks"][0]
    print(f"{f'reading every one of {BACKLOG:,} pending tasks':<44} {every:8.2f} ms")
    print(f"{'store.failing_tasks(50) of them (3 failing)':<44} {failing:8.2f} ms  "
          f"({failing / every:4.2f}x)  target <= 0.2x  " + ("MET" if failing <= 0.2 * every else "MISSED"))
    print(_line(f"GET / at {BACKLOG:,} pending tasks, 3 failing", results["backlog"][0], None, floor))
    print(_line("GET / at 10 pending tasks, 3 failing", results["backlog10"][0], None, floor))
    backlog = results["backlog"][0] / results["backlog10"][0]
    print(f"{'GET / at 5,000 pending against at 10':<44} {backlog:8.2f}x  target <= 2x  "
          + ("MET" if backlog <= 2 else "MISSED"))
    missed = (results["review"][0] > 50 or results["dashboard"][0] > 50 or results["metrics"][0] > 20
              or ratio > 1.5 or failing > 0.2 * every or backlog > 2)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
