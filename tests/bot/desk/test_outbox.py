"""The durable outbox: retried with backoff until it lands, once; one channel never holds up another."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.channel import Target
import bot.desk.outbox as outbox_module
from bot.desk import ReviewDesk
from bot.desk.outbox import MAX_BACKOFF, backoff
from bot.store import SqliteStore

from ..runtime_support import FakeClock, db_execute, wait_for
from .support import FlakyChannel, StuckChannel, make_review

SLACK_A, SLACK_B = {"slack": {"channel": "C0AAA"}}, {"slack": {"channel": "C0BBB"}}
GITHUB = {"github": {"repository": "octo/ops", "issue": 42}}


def desk_with(tmp_path: Path, **channels: Any) -> tuple[ReviewDesk, SqliteStore, FakeClock]:
    store = SqliteStore(tmp_path / "state")
    clock = FakeClock()
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), **channels}, clock=clock)
    return desk, store, clock


def test_a_review_posted_to_two_targets_of_one_kind_holds_two_refs(tmp_path: Path) -> None:
    slack = FlakyChannel("slack")
    desk, store, _ = desk_with(tmp_path, slack=slack)
    review = make_review()
    store.put_review(review)
    desk.open(review, [SLACK_A, SLACK_B, SLACK_A])  # a repeated target is one target
    desk.flush()
    stored = store.get_review(review.id)
    assert sorted(p["target"] for p in stored.posts) == ["local", "slack:C0AAA", "slack:C0BBB"]
    assert [d[2] for d in slack.delivered] == ["slack:C0AAA", "slack:C0BBB"]
    assert [t["key"] for t in stored.targets] == ["local", "slack:C0AAA", "slack:C0BBB"]
    desk.open(stored, [SLACK_A, SLACK_B])  # idempotent per target: nothing new to post
    desk.flush()
    assert len(slack.delivered) == 2 and store.pending_tasks() == []


def test_updates_and_escalations_reach_every_message_of_the_review(tmp_path: Path) -> None:
    slack = FlakyChannel("slack")
    desk, store, _ = desk_with(tmp_path, slack=slack)
    review = make_review()
    store.put_review(review)
    desk.open(review, [SLACK_A])
    desk.escalate(review, [{"slack": {"channel": "C0PAGER"}}], "Escalated: no decision")
    desk.update(review, "Decided: APPROVE")
    desk.flush()
    desk.flush()  # an update waits for its post; a second pass delivers it
    updates = sorted(text for kind, _, text in slack.delivered if kind == "update")
    assert updates == ["escalation:slack:C0PAGER: Decided: APPROVE", "slack:C0AAA: Decided: APPROVE"]
    assert ("escalate", "demo-1", "slack:C0PAGER") in slack.delivered
    assert store.pending_tasks() == []


def test_a_channel_failing_five_times_then_recovering_delivers_exactly_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slack = FlakyChannel("slack", failures=5)
    desk, store, clock = desk_with(tmp_path, slack=slack)
    review = make_review()
    store.put_review(review)
    with caplog.at_level(logging.INFO):
        desk.open(review, [SLACK_A])
        for attempt in range(1, 6):
            desk.outbox.deliver_due("slack")
            [task] = [t for t in store.pending_tasks(review.id) if t.channel == "slack"]
            assert (task.attempts, task.last_error) == (attempt, "slack is down")
            assert task.not_before == clock() + backoff(attempt)  # 1 s, 2 s, 4 s ...
            desk.outbox.deliver_due("slack")  # not due yet: no attempt
            assert slack.attempts == attempt
            clock.advance(seconds=backoff(attempt).total_seconds())
        desk.outbox.deliver_due("slack")
    assert slack.delivered == [("post", "demo-1", "slack:C0AAA")]
    assert [t.channel for t in store.pending_tasks()] == ["local"]  # never flushed here
    assert any(p["target"] == "slack:C0AAA" for p in store.get_review(review.id).posts)
    assert caplog.text.count("could not deliver post of review demo-1 to slack") == 5
    assert "delivered after 5 failed attempt(s)" in caplog.text


def test_retry_after_from_the_channel_is_honoured_and_backoff_is_capped(tmp_path: Path) -> None:
    slack = FlakyChannel("slack", failures=1, retry_after=30)
    desk, store, clock = desk_with(tmp_path, slack=slack)
    review = make_review()
    store.put_review(review)
    desk.open(review, [SLACK_A])
    desk.outbox.deliver_due("slack")
    [task] = [t for t in store.pending_tasks() if t.channel == "slack"]
    assert task.not_before == clock() + timedelta(seconds=30)
    assert backoff(50) == MAX_BACKOFF and backoff(1, retry_after=10**9) == MAX_BACKOFF


def test_a_failing_delivery_is_visible_in_status(tmp_path: Path) -> None:
    from bot.status import review_view

    slack = FlakyChannel("slack", failures=3)
    desk, store, _ = desk_with(tmp_path, slack=slack)
    review = make_review()
    store.put_review(review)
    desk.open(review, [SLACK_A])
    desk.flush()
    view = review_view(store.get_review(review.id), store.pending_tasks())
    assert view["targets"] == [
        {"target": "local", "role": "post", "delivered": True, "attempts": 0, "error": None},
        {"target": "slack:C0AAA", "role": "post", "delivered": False, "attempts": 1, "error": "slack is down"},
    ]


def test_a_dead_channel_does_not_delay_another(tmp_path: Path) -> None:
    """Delivery threads only, the tick never started: a hung Slack API leaves GitHub's delivery untouched."""
    slack, github = StuckChannel("slack"), FlakyChannel("github")
    store = SqliteStore(tmp_path / "state")
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), "slack": slack, "github": github}, clock=FakeClock())
    desk.start()
    try:
        review = make_review()
        store.put_review(review)
        desk.open(review, [SLACK_A, GITHUB])
        assert slack.entered.wait(10)  # Slack's delivery thread is stuck inside its call
        wait_for(lambda: github.delivered, timeout=10, what="the GitHub post")
        assert github.delivered == [("post", "demo-1", "github:octo/ops#42")]
        assert slack.delivered == []
    finally:
        slack.release.set()
        desk.stop()
    wait_for(lambda: any(p["target"] == "slack:C0AAA" for p in store.get_review("demo-1").posts),
             timeout=10, what="the Slack post once released")


def test_an_unconfigured_channel_kind_goes_to_the_local_channel_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    desk, store, _ = desk_with(tmp_path)
    review = make_review()
    store.put_review(review)
    with caplog.at_level(logging.WARNING):
        desk.open(review, [SLACK_A])
    desk.flush()
    assert [p["target"] for p in store.get_review(review.id).posts] == ["local"]
    assert "post_to target slack:C0AAA needs the slack channel" in caplog.text


def test_a_task_for_a_review_that_is_gone_is_dropped_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    desk, store, _ = desk_with(tmp_path)
    review = make_review()
    store.put_review(review)
    desk.open(review, [])
    db_execute(tmp_path / "state", "DELETE FROM reviews")
    desk.flush()
    assert store.pending_tasks() == [] and "dropped" in caplog.text


def test_targets_round_trip_through_their_config_shape() -> None:
    for raw in (SLACK_A, GITHUB, {"github": {"repository": "octo/ops"}}, {"local": {}}):
        assert Target.from_dict(raw).to_dict() == raw
    assert Target.from_dict(GITHUB).key == "github:octo/ops#42"
    with pytest.raises(ValueError, match="needs a channel"):
        Target.from_dict({"slack": {}})


class FinishCounting(SqliteStore):
    """The SQLite store, keeping the task ids of each write that finished tasks."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.finishes: list[list[str]] = []

    def finish_tasks(self, task_ids: Sequence[str]) -> None:
        self.finishes.append(sorted(task_ids))
        super().finish_tasks(task_ids)


def test_the_tasks_a_round_delivers_are_finished_in_one_write(tmp_path: Path) -> None:
    store = FinishCounting(tmp_path / "state")
    slack = FlakyChannel("slack")
    desk = ReviewDesk(store, {"local": FlakyChannel("local"), "slack": slack}, clock=FakeClock())
    review = make_review()
    store.put_review(review)
    desk.open(review, [SLACK_A, SLACK_B, {"slack": {"channel": "C0CCC"}}])
    desk.flush()
    assert len(slack.delivered) == 3 and store.pending_tasks() == []
    slack_rounds = [ids for ids in store.finishes if any("slack" in task_id for task_id in ids)]
    assert [len(ids) for ids in slack_rounds] == [3], store.finishes


def test_a_channel_holds_its_deliveries_while_its_intake_is_busy_and_at_most_max_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk, store, _ = desk_with(tmp_path, slack=FlakyChannel("slack"))
    busy = [30.0]
    desk.outbox.yield_to("slack", lambda: busy[0])
    assert 0 < desk.outbox.held("slack") <= outbox_module.MAX_HOLD
    assert desk.outbox.held("local") == 0, "a channel without an intake to yield to is never held"
    busy[0] = -0.1
    assert desk.outbox.held("slack") == 0, "quiet again: delivered at once"
    monkeypatch.setattr(outbox_module, "MAX_HOLD", 0.2)
    busy[0] = 30.0
    assert desk.outbox.held("slack") > 0
    wait_for(lambda: desk.outbox.held("slack") == 0, what="a round delivered after MAX_HOLD while still busy")
    assert desk.outbox.held("slack") > 0, "and held again after it"
