"""/metrics, parsed as Prometheus parses it, against a known sequence of runs, votes and deliveries."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client.parser import text_string_to_metric_families
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from bot.desk import Authorizer, Decisions, ListMembership, ReviewDesk
from bot.server import create_app
from bot.store.base import OutboxTask
from bot.web.metrics import MeteredRunner, MeteredVotePath, Metrics
from bot.web.pages import web_routes

from ..runtime_support import T0, FakeClock, RecordingChannel, bench, demo, wait_for
from .support import TOKEN, bearer

ALL = {"local": ListMembership("local"), "slack": ListMembership("slack"), "github": ListMembership("github")}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


def test_metrics_count_runs_reviews_votes_deliveries_and_the_time_to_apply(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(), demo("other")], web={"secret": "x" * 32, "token": TOKEN})
    metrics = Metrics(b.store, b.clock)
    desk = ReviewDesk(b.store, {"local": RecordingChannel()}, clock=b.clock, inline=True)
    runner = MeteredRunner(b.config, b.store, desk, clock=b.clock, metrics=metrics)
    first = runner.run_foreground("demo")
    b.clock.advance(seconds=40)
    runner.run_foreground("other")
    b.clock.advance(seconds=60)
    assert first is not None and first.review_id
    decisions = Decisions()
    decisions.subscribe(runner.apply_decided)
    votes = MeteredVotePath(b.store, Authorizer(ALL), clock=b.clock, decisions=decisions, metrics=metrics)
    answers = [votes.handle(Reply(who, parse_command(f"approve {first.review_id}")))  # type: ignore[arg-type]
               for who in (Identity("local", "mallory"), Identity("slack", "U0ZZZ"), Identity("local", "alice"))]
    assert [a.kind for a in answers] == [AnswerKind.REFUSED, AnswerKind.REFUSED, AnswerKind.DECIDED]
    wait_for(lambda: b.store.get_review(first.review_id).status == "applied", what="the decision to be applied")
    # the run thread notes the time right after apply_outcome returns
    wait_for(lambda: value(metrics.exposition().decode(), "loopbot_vote_to_applied_seconds_count") == 1,
             what="the time to apply noted")
    b.store.add_task(OutboxTask(id="x.post.slack-c1", channel="slack", action="post", review_id=None,
                                payload={"target": {"slack": {"channel": "C1"}}},
                                created_at=b.clock() - timedelta(seconds=30)))
    for n in (1, 2):
        b.store.add_task(OutboxTask(id=f"x.answer.github-{n}", channel="github", action="answer", review_id=None,
                                    payload={"target": {"github": {"repo": "o/r", "issue": n}}}, created_at=b.clock()))

    def webhook(request: Request) -> PlainTextResponse:
        return PlainTextResponse("", 202 if request.headers.get("x-good") else 401)

    routes = [Route("/github/webhook", webhook, methods=["POST"]), *web_routes(b.config, b.store, clock=b.clock,
                                                                              metrics=metrics)]
    client = TestClient(create_app(b.store, b.config.state_dir, routes, metrics=metrics))
    for good in (True, True, False):
        client.post("/github/webhook", headers={"x-good": "1"} if good else {})
    text = client.get("/metrics", headers=bearer()).text

    assert value(text, "loopbot_runs", loop="other", status="waiting") == 1
    # demo's run ended (archived) and is still counted, under its final status only
    assert value(text, "loopbot_runs", loop="demo", status="completed") == 1
    assert ("loopbot_runs", (("loop", "demo"), ("status", "waiting"))) not in samples(text)
    assert sum(v for (name, _), v in samples(text).items() if name == "loopbot_runs") == 2
    assert value(text, "loopbot_reviews", status="open") == 1
    assert value(text, "loopbot_reviews", status="decided") == 0
    assert value(text, "loopbot_oldest_open_review_age_seconds") == 60  # "other"'s review, opened 60 s ago
    assert value(text, "loopbot_votes_total", channel="local", result="refused") == 1
    assert value(text, "loopbot_votes_total", channel="slack", result="refused") == 1
    assert value(text, "loopbot_votes_total", channel="local", result="decided") == 1
    assert value(text, "loopbot_webhook_deliveries_total", channel="github", result="accepted") == 2
    assert value(text, "loopbot_webhook_deliveries_total", channel="github", result="refused") == 1
    assert value(text, "loopbot_vote_to_applied_seconds_count") == 1
    assert value(text, "loopbot_outbox_backlog", channel="slack") == 1
    assert value(text, "loopbot_outbox_backlog", channel="github") == 2
    assert value(text, "loopbot_outbox_backlog", channel="local") == 0
    assert value(text, "loopbot_outbox_oldest_task_age_seconds", channel="slack") == 30
    assert value(text, "loopbot_outbox_oldest_task_age_seconds", channel="github") == 0


def test_the_scheduler_lag_is_how_late_a_job_was_submitted(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    clock = FakeClock(T0 + timedelta(seconds=90))
    metrics = Metrics(b.store, clock)
    scheduler = BackgroundScheduler(timezone="UTC")
    metrics.watch_scheduler(scheduler)
    scheduler.add_job(lambda: None, "date", run_date=T0, misfire_grace_time=None)
    scheduler.start()
    try:
        wait_for(lambda: value(metrics.exposition().decode(), "loopbot_scheduler_lag_seconds_count") == 1,
                 what="the job to be submitted")
    finally:
        scheduler.shutdown(wait=True)
    assert value(metrics.exposition().decode(), "loopbot_scheduler_lag_seconds_sum") == 90


class Recording:
    """A store that notes which reads a scrape makes (it passes each call on to the real one)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return real(*args, **kwargs)

        return call


def test_a_scrape_reads_no_list_of_reviews_however_many_are_open(tmp_path: Path) -> None:
    from .support import site

    s = site(tmp_path)
    for n in range(1, 31):
        s.review(n)
    recording = Recording(s.store)
    Metrics(recording, s.clock).exposition()  # type: ignore[arg-type]
    names = {name for name, _, _ in recording.calls}
    assert names <= {"counts", "run_counts", "outbox_backlog", "open_reviews", "next_task_at"}
    assert all(kwargs == {"limit": 1} for name, _, kwargs in recording.calls if name == "open_reviews")
