"""A loopbot with pages on, on a temp state dir: its config, store, clock, app and stored reviews and runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from loop_engine.proposal import ChangeList, Link, Proposal, Table, Text
from loop_engine.review import CheckpointTrigger, ReviewRequest
from starlette.applications import Starlette

from bot.config import BotConfig, load_config
from bot.review_records import Review, ReviewPolicy, Reviewers
from bot.server import create_app
from bot.store.base import RunRecord, Store
from bot.store.open import open_store
from bot.web.links import ReviewLinks
from bot.web.metrics import Metrics
from bot.web.pages import review_links, web_routes

from ..runtime_support import T0, FakeClock, demo, write_config

SECRET = "s3cret-signing-key-0123456789abcdef"
TOKEN = "operator-token-0123456789abcdef"


def proposal(rows: int = 3) -> Proposal:
    table = Table(columns=["Issue", "Label", "Why"],
                  rows=[[f"#{n}", "P1" if n % 2 else "P2", f"reason {n} <b>bold</b>"] for n in range(1, rows + 1)],
                  title="Label changes")
    return Proposal(summary=f"Approve to apply {rows} label changes to octo/ops", sections=[
        Text(markdown="Found *these* <script>alert(1)</script>", title="Notes"),
        table,
        ChangeList(items=["#1: add P1"], title="Changes"),
        Link(url="https://example.com/report", text="the report"),
    ])


@dataclass
class Site:
    config: BotConfig
    store: Store
    clock: FakeClock
    app: Starlette
    metrics: Metrics
    links: ReviewLinks | None
    made: list[str] = field(default_factory=list)

    def review(self, n: int, *, rows: int = 3, loop: str = "demo", age: timedelta = timedelta(0),
               **extra: Any) -> Review:
        """Stores open review ``demo-N`` of run ``demo-run-N`` (asked ``age`` before the clock's now)."""
        created = self.clock() - age
        request = ReviewRequest(checkpoint_id=f"checkpoint_{n:04d}", trigger=CheckpointTrigger.ON_PLAN_COMPLETE,
                                state_summary={"iteration": 1}, proposed_action=f"apply the labels ({n})",
                                context={"repo": "octo/ops"}, timestamp=created, proposal=proposal(rows))
        review = Review(id=f"demo-{n}", loop=loop, run_id=f"demo-run-{n}", checkpoint_id=request.checkpoint_id,
                        request=request.to_dict(),
                        policy=ReviewPolicy(reviewers=Reviewers(local=["alice"]), decide_after=timedelta(hours=4)),
                        created_at=created, **extra)
        self.store.put_review(review)
        return review

    def run(self, n: int, *, loop: str = "demo", status: str = "waiting", review: bool = True) -> RunRecord:
        record = RunRecord(id=f"demo-run-{n}", loop=loop, status=status, created_at=self.clock(),
                           updated_at=self.clock(), trigger="manual", review_id=f"demo-{n}" if review else None)
        self.store.put_run(record)
        return record

    def url(self, review_id: str) -> str:
        assert self.links is not None
        return self.links.url(review_id).removeprefix(self.config.web.base_url)


def site(root: Path, web: dict[str, Any] | None = None, loops: list[dict[str, Any]] | None = None,
         **top: Any) -> Site:
    """Pages on with ``SECRET`` and ``TOKEN`` unless ``web`` says otherwise (``{}``: pages off)."""
    block = {"secret": SECRET, "token": TOKEN, "base_url": "https://bot.example.com"} if web is None else web
    config = load_config(write_config(root, loops if loops is not None else [demo()], web=block, **top), environ={})
    store = open_store(config)
    clock = FakeClock(T0)
    metrics = Metrics(store, clock)
    routes = web_routes(config, store, clock=clock, metrics=metrics)
    app = create_app(store, config.state_dir, routes, metrics=metrics)
    return Site(config, store, clock, app, metrics, review_links(config, clock))


def bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def at(moment: datetime) -> FakeClock:
    return FakeClock(moment)
