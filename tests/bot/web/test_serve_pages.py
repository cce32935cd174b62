"""End to end: a real ``loopbot serve`` with pages on and the fake Slack; from the Slack message to the page.

The review message in Slack carries the signed link; the link opens the
review's page on the running bot (with the whole proposal), and /metrics
counts the Slack answer the bot then takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.bot.e2e.conftest import wait_for, ws
from tests.bot.e2e.slack_support import BOT_TOKEN, SECRET as SLACK_SECRET, SlackDesk, desk, slack_loop
from tests.fakes.slack_api import FakeSlackApi

from .support import SECRET, TOKEN

pytestmark = pytest.mark.e2e
__all__ = ["desk", "ws"]  # the fixtures, imported for pytest

BASE = "https://loopbot.example.com"


@pytest.fixture
def fake() -> Iterator[FakeSlackApi]:
    with FakeSlackApi() as api:
        yield api


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def test_the_slack_message_links_the_page_and_metrics_count_the_answer(desk: SlackDesk) -> None:
    desk.ws.env.update(LOOPBOT_WEB_SECRET=SECRET, LOOPBOT_WEB_TOKEN=TOKEN)
    desk.ws.write_config([slack_loop()], slack={"bot_token": BOT_TOKEN, "api_base_url": desk.fake.base_url,
                                                "signing_secret": SLACK_SECRET},
                         web={"secret": "${LOOPBOT_WEB_SECRET}", "token": "${LOOPBOT_WEB_TOKEN}", "base_url": BASE})
    bot = desk.serve()
    review = desk.ws.wait_open_review()
    message = desk.posted_review(review["id"])
    (link,) = re.findall(r"<(https://loopbot\.example\.com/reviews/[^|>]+)\|Whole proposal and history>",
                         str(message["blocks"]))
    local = f"http://127.0.0.1:{bot.port}"
    page = httpx.get(link.replace(BASE, local), timeout=10)
    assert page.status_code == 200 and f"Review {review['id']}" in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert httpx.get(f"{local}/reviews/{review['id']}", timeout=10).status_code == 404  # no link, no page
    assert httpx.get(f"{local}/", timeout=10).status_code == 401
    operator = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{local}/", headers=operator, timeout=10).status_code == 200

    assert desk.slash(f"approve {review['id']}").status_code == 200
    desk.ws.wait_run(review["run"], "completed")

    def applied() -> str | None:  # the run completes inside apply_outcome, the timing is noted right after
        text = httpx.get(f"{local}/metrics", headers=operator, timeout=10).text
        return text if metric(text, "loopbot_vote_to_applied_seconds_count") == 1 else None

    scraped = wait_for(applied, timeout=10, what="the vote-to-applied time to be observed")
    assert metric(scraped, "loopbot_votes_total", channel="slack", result="decided") == 1
    assert metric(scraped, "loopbot_webhook_deliveries_total", channel="slack", result="accepted") >= 1
    assert metric(scraped, "loopbot_reviews", status="open") == 0
    assert SECRET not in bot.log() and TOKEN not in bot.log()
