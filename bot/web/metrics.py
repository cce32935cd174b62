"""/metrics in Prometheus' format: the store read at scrape time, and the process's own counters.

A scrape reads only aggregates the store computes in SQL - ``counts()``,
``run_counts()`` (every run by loop and status), ``outbox_backlog()`` (pending
tasks by channel), the oldest open review, each channel's earliest pending
task - so it costs the same at 10 and at 10,000 open reviews (no review or
run is listed).
What only happens in this process is counted as it happens: votes by
channel and answer (``MeteredVotePath``), webhook deliveries by channel and
whether they were accepted (``count_deliveries``), the time from a deciding
vote to its run resuming, and how late the scheduler fired each loop.
Each app has its own registry, so two apps in one process (tests) never
share a number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapters.channel import Answer, Reply

from bot.desk import VotePath
from bot.desk.votes import Ballot
from bot.runner import Runner
from bot.store.base import Store, StoreError

__all__ = ["Metrics", "MeteredRunner", "MeteredVotePath", "CountDeliveries", "CHANNELS", "CONTENT_TYPE"]

#: The channels whose outbox is reported (``adapters.channel.TARGET_KINDS``).
CHANNELS = ("local", "slack", "github")
#: The exposition's media type, as prometheus_client names it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: The routes whose answers count as webhook deliveries, and the channel each belongs to.
WEBHOOK_PATHS = {"/github/webhook": "github", "/slack/events": "slack"}


def _age(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


class StoreCollector(Collector):
    """Reads the store on every scrape (a custom collector: the numbers are never stale)."""

    def __init__(self, store: Store, clock: Callable[[], datetime], channels: Sequence[str] = CHANNELS) -> None:
        self._store = store
        self._clock = clock
        self._channels = tuple(channels)

    def collect(self) -> Iterator[Metric]:
        now = self._clock()
        counts = self._store.counts()
        runs = GaugeMetricFamily("loopbot_runs", "Runs stored, ended ones too, by loop and status.",
                                 labels=["loop", "status"])
        for (loop, status), number in sorted(self._store.run_counts().items()):
            runs.add_metric([loop, status], number)
        yield runs
        reviews = GaugeMetricFamily("loopbot_reviews", "Reviews waiting for people (open) or to be applied (decided).",
                                    labels=["status"])
        reviews.add_metric(["open"], counts["open_reviews"])
        reviews.add_metric(["decided"], counts["decided_reviews"])
        yield reviews
        oldest = self._store.open_reviews(limit=1)
        yield GaugeMetricFamily("loopbot_oldest_open_review_age_seconds", "Age of the oldest open review (0: none).",
                                value=_age(now, oldest[0].created_at) if oldest else 0.0)
        backlog = GaugeMetricFamily("loopbot_outbox_backlog", "Outbox tasks not delivered yet, by channel.",
                                    labels=["channel"])
        pending = self._store.outbox_backlog()
        for channel in sorted({*self._channels, *pending}):
            backlog.add_metric([channel], pending.get(channel, 0))
        yield backlog
        waiting = GaugeMetricFamily(
            "loopbot_outbox_oldest_task_age_seconds",
            "How long the earliest pending task of each channel has been ready and not delivered (0: none).",
            labels=["channel"])
        for channel in self._channels:
            waiting.add_metric([channel], _age(now, self._store.next_task_at(channel)))
        yield waiting


class Metrics:
    """The registry /metrics exposes, with the counters the rest of the bot feeds."""

    def __init__(self, store: Store, clock: Callable[[], datetime], channels: Sequence[str] = CHANNELS) -> None:
        self.registry = CollectorRegistry()
        self._store = store
        self._clock = clock
        self.votes = Counter("loopbot_votes", "Answers to reviews, by channel and what became of them "
                             "(counted, decided, refused, duplicate, ...).", ["channel", "result"],
                             registry=self.registry)
        self.deliveries = Counter("loopbot_webhook_deliveries", "Webhook requests, by channel, accepted (2xx) "
                                  "or refused.", ["channel", "result"], registry=self.registry)
        self.vote_to_applied = Histogram(
            "loopbot_vote_to_applied_seconds", "From the vote that decided a review to its run resuming with it.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300), registry=self.registry)
        self.scheduler_lag = Histogram(
            "loopbot_scheduler_lag_seconds", "How late a scheduled loop was handed to the runner.",
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 30, 60, 300, 3600), registry=self.registry)
        self.registry.register(StoreCollector(store, clock, channels))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def applied(self, review_id: str) -> None:
        """After ``apply``: the decided-to-applied time of ``review_id``, if it was applied."""
        try:
            review = self._store.get_review(review_id)
        except (StoreError, OSError, ValueError):
            return
        if review.status == "applied" and review.outcome is not None and review.applied_at is not None:
            self.vote_to_applied.observe(_age(review.applied_at, review.outcome.decided_at))

    def watch_scheduler(self, scheduler: Any) -> None:
        """Observe each submitted job's lateness (an APScheduler ``BaseScheduler``)."""
        from apscheduler.events import EVENT_JOB_SUBMITTED

        def submitted(event: Any) -> None:
            times = getattr(event, "scheduled_run_times", None) or []
            if times:
                self.scheduler_lag.observe(_age(self._clock(), max(times)))

        scheduler.add_listener(submitted, EVENT_JOB_SUBMITTED)


class MeteredVotePath(VotePath):
    """The vote path, counting each answer by the voter's channel and its kind (both stages, so every entrance)."""

    def __init__(self, *args: Any, metrics: Metrics, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._metrics = metrics

    def preparer(self, upcoming: Sequence[Reply] = ()) -> Callable[[Reply], Answer | Exception | Ballot]:
        prepare = super().preparer(upcoming)

        def counted(reply: Reply) -> Answer | Exception | Ballot:
            prepared = prepare(reply)
            if not isinstance(prepared, Ballot):
                self._count(reply, prepared)
            return prepared

        return counted

    def cast(self, ballots: Sequence[Ballot]) -> list[Answer | Exception]:
        answers = super().cast(ballots)
        for ballot, answer in zip(ballots, answers, strict=True):
            self._count(ballot.reply, answer)
        return answers

    def _count(self, reply: Reply, answer: Answer | Exception) -> None:
        result = answer.kind.value if isinstance(answer, Answer) else "error"
        self._metrics.votes.labels(reply.voter.channel, result).inc()


class MeteredRunner(Runner):
    """The runner, timing each decided review from its deciding vote to its run resumed with it.

    Every way a decision is applied (a vote in this process, the tick after
    ``loopbot decide`` or a deadline) ends in ``apply_outcome``.
    """

    def __init__(self, *args: Any, metrics: Metrics, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._metrics = metrics

    def apply_outcome(self, review_id: str) -> None:
        try:
            super().apply_outcome(review_id)
        finally:
            self._metrics.applied(review_id)


class CountDeliveries:
    """ASGI middleware: each answer of a webhook route counted as accepted (2xx) or refused."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        channel = WEBHOOK_PATHS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if channel is None:
            await self.app(scope, receive, send)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                ok = 200 <= int(message["status"]) < 300
                self.metrics.deliveries.labels(channel, "accepted" if ok else "refused").inc()
            await send(message)

        await self.app(scope, receive, watch)
