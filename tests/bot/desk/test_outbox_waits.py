"""An upstream's wait (``Retry-After: inf``, ``1e20``, ``nan``, ``-5``) never stops a channel's outbox.

Slack and GitHub are the fake servers answering those headers; the waits are
clamped to finite values within the backoff bounds before any arithmetic, and
an unexpected error inside a delivery thread is logged while the thread lives on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.channel import Channel, ChannelError, Target
from adapters.github.channel import GitHubChannel
from adapters.github.client import GitHubClient, make_github
from adapters.slack.channel import SlackChannel
from adapters.slack.client import SlackClient
from bot.desk import ReviewDesk, review_post
from bot.desk.outbox import MAX_BACKOFF, backoff
from bot.store import SqliteStore
from tests.fakes.github_api import FakeGitHub
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi

from ..runtime_support import FakeClock, wait_for
from .support import FlakyChannel, make_review

HOSTILE = ["inf", "1e20", "nan", "-5"]
SLACK = {"slack": {"channel": "C0AAA"}}
GITHUB = {"github": {"repository": "octo/ops", "issue": 42}}


@pytest.fixture
def slack_api() -> Iterator[FakeSlackApi]:
    with FakeSlackApi() as fake:
        yield fake


@pytest.fixture
def github_api() -> Iterator[FakeGitHub]:
    with FakeGitHub() as fake:
        fake.add_issue("octo/ops", 42, title="Ops reviews")
        yield fake


def slack_channel(fake: FakeSlackApi) -> SlackChannel:
    return SlackChannel(SlackClient(BOT_TOKEN, base_url=fake.base_url))


def github_channel(fake: FakeGitHub) -> GitHubChannel:
    return GitHubChannel(GitHubClient(make_github(fake.base_url, token="ghp_test")), bot_login=fake.bot_login)


def refuse_once(kind: str, slack_api: FakeSlackApi, github_api: FakeGitHub, value: str) -> tuple[Channel, Any]:
    """The channel of ``kind`` whose next post is answered with a rate limit naming ``Retry-After: value``."""
    if kind == "slack":
        slack_api.fail("chat.postMessage", status=429, error="ratelimited", retry_after=value)
        return slack_channel(slack_api), SLACK
    github_api.fail("POST", r"/issues/42/comments$", 429, headers={"Retry-After": value})
    return github_channel(github_api), GITHUB


def posted(kind: str, slack_api: FakeSlackApi, github_api: FakeGitHub) -> int:
    if kind == "slack":
        return sum(1 for message in slack_api.channel_messages("C0AAA") if message["text"].startswith("Review "))
    return len([c for c in github_api.comments_on("octo/ops", 42) if "loopbot:review=" in c["body"]])


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("kind", ["slack", "github"])
def test_a_hostile_retry_after_is_a_bounded_wait(tmp_path: Path, slack_api: FakeSlackApi, github_api: FakeGitHub,
                                                 kind: str, value: str) -> None:
    channel, target = refuse_once(kind, slack_api, github_api, value)
    store, clock = SqliteStore(tmp_path / "state"), FakeClock()
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), kind: channel}, clock=clock)
    review = make_review()
    store.put_review(review)
    desk.open(review, [target])
    desk.flush()  # the refused attempt: rescheduled, not an OverflowError
    [task] = [t for t in store.pending_tasks() if t.channel == kind]
    assert task.attempts == 1 and task.not_before is not None
    wait = task.not_before - clock()
    assert MAX_BACKOFF * 0 <= wait <= MAX_BACKOFF
    clock.advance(seconds=MAX_BACKOFF.total_seconds())
    desk.flush()
    assert store.pending_tasks() == [] and posted(kind, slack_api, github_api) >= 1


@pytest.mark.parametrize("kind", ["slack", "github"])
def test_the_delivery_thread_keeps_posting_after_retry_after_inf_and_after_a_restart(
    tmp_path: Path, slack_api: FakeSlackApi, github_api: FakeGitHub, kind: str
) -> None:
    channel, target = refuse_once(kind, slack_api, github_api, "inf")
    store, clock = SqliteStore(tmp_path / "state"), FakeClock()
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), kind: channel}, clock=clock)
    desk.start()
    try:
        first = make_review("demo-1")
        store.put_review(first)
        desk.open(first, [target])
        wait_for(lambda: any(t.attempts for t in store.pending_tasks() if t.channel == kind),
                 timeout=10, what="the refused attempt")
        assert desk.problem() is None  # the delivery thread lives on
        clock.advance(seconds=MAX_BACKOFF.total_seconds())
        wait_for(lambda: posted(kind, slack_api, github_api) == 1, timeout=10, what="the post after the wait")
        second = make_review("demo-2")
        store.put_review(second)
        desk.open(second, [target])
        wait_for(lambda: posted(kind, slack_api, github_api) == 2, timeout=10, what="the next post")
    finally:
        desk.stop()
    restarted = ReviewDesk(store, {"local": FlakyChannel("local"), kind: channel}, clock=clock)
    restarted.start()
    try:
        third = make_review("demo-3")
        store.put_review(third)
        restarted.open(third, [target])
        wait_for(lambda: posted(kind, slack_api, github_api) == 3, timeout=10, what="a post after the restart")
        assert restarted.problem() is None
    finally:
        restarted.stop()


def test_backoff_clamps_what_a_channel_asks_for() -> None:
    assert backoff(1, float("inf")) == MAX_BACKOFF and backoff(1, 1e20) == MAX_BACKOFF
    assert backoff(3, float("nan")) == backoff(3)  # no usable ask: the own backoff
    assert backoff(1, -5) == MAX_BACKOFF * 0


class _BrokenAsk(FlakyChannel):
    """A channel with a bug: its error's ``retry_after`` is not a number at all."""

    def post_request(self, target: Any, post: Any) -> Any:
        if not self.attempts:
            self.attempts += 1
            raise ChannelError("odd", retry_after="soon")  # type: ignore[arg-type]
        return super().post_request(target, post)


def test_an_unexpected_error_in_a_task_is_logged_and_the_tasks_after_it_still_go(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = _BrokenAsk("slack")
    store, clock = SqliteStore(tmp_path / "state"), FakeClock()
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), "slack": broken}, clock=clock)
    first, second = make_review("demo-1"), make_review("demo-2")
    for review in (first, second):
        store.put_review(review)
    with caplog.at_level(logging.ERROR):
        desk.open(first, [SLACK])
        desk.open(second, [SLACK])
        desk.flush()
    assert [d[1] for d in broken.delivered] == ["demo-2"]  # the crash of demo-1's task did not stop demo-2's
    assert "could not be attempted" in caplog.text
    [task] = [t for t in store.pending_tasks() if t.channel == "slack"]
    assert task.review_id == "demo-1" and task.not_before == clock() + MAX_BACKOFF  # set aside, not dropped
    clock.advance(seconds=MAX_BACKOFF.total_seconds())
    desk.flush()
    assert [d[1] for d in broken.delivered] == ["demo-2", "demo-1"]


@pytest.mark.parametrize(("header", "wait"), [("inf", 600.0), ("1e20", 600.0), ("nan", 1.0), ("-5", 0.0)])
def test_slack_s_hostile_retry_after_reaches_the_outbox_clamped(slack_api: FakeSlackApi, header: str,
                                                                 wait: float) -> None:
    slack_api.fail("chat.postMessage", status=429, error="ratelimited", retry_after=header)
    with pytest.raises(ChannelError) as raised:
        slack_channel(slack_api).post_request(Target("slack", channel="C0AAA"), review_post(make_review()))
    assert raised.value.retry_after == wait and not raised.value.permanent


class _StoreFailingOnce(SqliteStore):
    """A store whose first read of due tasks hits a bug (not a StoreError): the delivery thread must outlive it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failed = False

    def due_tasks(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug")
        return super().due_tasks(*args, **kwargs)


def test_a_delivery_thread_outlives_an_unexpected_error_and_keeps_posting(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    store, slack = _StoreFailingOnce(tmp_path / "state"), FlakyChannel("slack")
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), "slack": slack}, clock=FakeClock())
    with caplog.at_level(logging.ERROR):
        desk.start()
        try:
            wait_for(lambda: store.failed, timeout=10, what="the delivery thread's first pass")
            review = make_review()
            store.put_review(review)
            desk.open(review, [SLACK])
            wait_for(lambda: slack.delivered, timeout=10, what="the post after the error")
            assert desk.problem() is None
        finally:
            desk.stop()
    assert "outbox of" in caplog.text and "RuntimeError: a bug" in caplog.text
