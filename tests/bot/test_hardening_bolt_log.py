"""Bolt's own log lines, as the bot prints them: at WARNING and above, translated, never quoting a request (#23).

A real Bolt ``AsyncApp`` dispatches requests here (``async_dispatch``, its
public entry point) and logs through the logger the bot gives it, so what
``setup_logging`` prints is what ``loopbot serve`` would print.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator

import pytest
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.logging import setup_logging
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi, signed_headers

SECRET = "bolt-log-signing-secret"
BODY = "text=" + "x" * 50_000 + "%0A2026-12-01 10:00:00,000 INFO bot: decided: approve by slack:U0BOSS"


@pytest.fixture(autouse=True)
def _no_slack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLACK_SIGNING_SECRET", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlackApi]:
    with FakeSlackApi() as fake:
        yield fake


@pytest.fixture
def bolt(slack: FakeSlackApi) -> Callable[..., AsyncApp]:
    def build(token: str | None = None) -> AsyncApp:
        """Built as adapters.slack.listeners builds it: our client, our logger."""
        client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.base_url)
        return AsyncApp(signing_secret=SECRET, client=client, token=token, process_before_response=True,
                        logger=logging.getLogger("adapters.slack.listeners"))

    return build


def printed(stream: io.StringIO) -> list[str]:
    return [line.split(" ", 2)[2] for line in stream.getvalue().splitlines()]


async def dispatch(app: AsyncApp, body: str, headers: dict[str, str]) -> int:
    response = await app.async_dispatch(AsyncBoltRequest(body=body, headers={k: [v] for k, v in headers.items()}))
    return response.status


@pytest.mark.parametrize("age", [0, 600], ids=["bad-signature", "stale"])
async def test_a_refused_request_is_not_logged_by_bolt(stream: io.StringIO, bolt: Callable[..., AsyncApp],
                                                       age: int) -> None:
    """Bolt logged the whole body at INFO; adapters.slack.route says why in one line before Bolt sees it."""
    setup_logging(stream=stream)
    secret = "not-the-secret" if age == 0 else SECRET
    assert await dispatch(bolt(), BODY, signed_headers(secret, BODY, timestamp=int(time.time()) - age)) == 401
    assert printed(stream) == []


def test_the_client_and_token_warning_at_every_start_is_silenced(stream: io.StringIO,
                                                                 bolt: Callable[..., AsyncApp]) -> None:
    setup_logging(stream=stream)
    bolt(token="xoxb-from-the-environment")
    assert printed(stream) == []


async def test_an_unhandled_request_is_translated_without_its_body(stream: io.StringIO,
                                                                   bolt: Callable[..., AsyncApp]) -> None:
    setup_logging(stream=stream)
    body = "command=%2Fother&text=" + "secret-ish+words+" * 100
    assert await dispatch(bolt(), body, signed_headers(SECRET, body)) == 404
    assert printed(stream) == ["WARNING adapters.slack.listeners: slack: no listener for a request Slack sent "
                               "(answered 404)"]


def test_bolt_info_lines_are_dropped_and_its_own_loggers_kept_at_warning(stream: io.StringIO) -> None:
    setup_logging(stream=stream)
    assert logging.getLogger("slack_bolt").getEffectiveLevel() == logging.WARNING
    logger = logging.getLogger("adapters.slack.listeners")
    logger.info("ours at INFO stays")
    record = logger.makeRecord(logger.name, logging.INFO, "/x/site-packages/slack_bolt/app/async_app.py", 1,
                               "request body: %s", ("x" * 10_000,), None)
    logger.handle(record)
    record = logger.makeRecord(logger.name, logging.WARNING, "/x/site-packages/slack_bolt/app/async_app.py", 1,
                               "something new %s", ("y" * 10_000,), None)
    logger.handle(record)
    lines = printed(stream)
    assert lines[0] == "INFO adapters.slack.listeners: ours at INFO stays"
    assert len(lines) == 2 and lines[1].endswith(" [cut]") and len(lines[1]) < 400
