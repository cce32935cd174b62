"""One tick: run requests from the inbox, decided reviews applied, deadlines fired once each."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bot.reviews import Vote, cast_vote
from bot.service import RUN_REQUEST, Service
from bot.store import FileStore
from loop_engine.checkpoint import HumanDecision

from .runtime_support import T0, Bench, bench, demo, wait_for

TIMEOUTS = {
    "remind_after": "1h", "escalate_after": "2h", "escalate_to": [{"slack": {"channel": "C0PAGER"}}],
    "decide_after": "3h", "default": "reject",
}


def service_for(b: Bench) -> Service:
    return Service(b.store, b.runner, clock=b.clock)


def settle(service: Service, b: Bench) -> None:
    service.tick()
    assert b.runner.join(10)


def test_a_run_request_starts_a_run_once(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(overlap="allow")])
    service = service_for(b)
    request_id = b.store.enqueue_request(RUN_REQUEST, {"loop": "demo", "trigger": "cli"})
    settle(service, b)
    runs = b.store.list_runs()
    assert [(r.id, r.trigger, r.status) for r in runs] == [("demo-run-1", f"cli ({request_id})", "waiting")]
    assert b.store.take_requests() == []
    settle(service, b)
    assert len(b.store.list_runs()) == 1


class ForgetfulStore(FileStore):
    """finish_request is lost (a crash right after the run started): the request comes back."""

    def finish_request(self, request_id: str) -> None:
        return None


def test_a_redelivered_request_does_not_start_a_second_run(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(overlap="allow")], store=ForgetfulStore(tmp_path / "state"))
    service = service_for(b)
    b.store.enqueue_request(RUN_REQUEST, {"loop": "demo"})
    settle(service, b)
    settle(service, b)
    assert len(b.store.list_runs()) == 1


def test_a_request_for_an_unknown_loop_is_dropped_with_a_log(tmp_path: Path, caplog: Any) -> None:
    b = bench(tmp_path, [demo()])
    b.store.enqueue_request(RUN_REQUEST, {"loop": "gone"})
    settle(service_for(b), b)
    assert b.store.list_runs() == [] and b.store.take_requests() == []
    assert 'unknown loop "gone"' in caplog.text


def test_a_decided_review_is_applied_by_the_tick(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.store.update_review(run.review_id, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE), now=T0))
    settle(service_for(b), b)
    assert b.store.get_run(run.id).status == "completed"
    assert b.store.get_review(run.review_id).status == "applied"


def test_deadlines_remind_escalate_then_decide_each_once(tmp_path: Path) -> None:
    # Slack is configured but has no channel in this issue: escalation falls back to local, with a warning.
    slack = {"bot_token": "xoxb-not-used", "signing_secret": "not-used"}
    b = bench(tmp_path, [demo(review={"timeout": TIMEOUTS})], slack=slack)
    service = service_for(b)
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    rid = run.review_id
    assert b.channel.kinds() == ["post"]

    b.clock.advance(minutes=59)
    settle(service, b)
    assert b.channel.kinds() == ["post"]

    b.clock.advance(minutes=2)
    settle(service, b)
    settle(service, b)
    assert b.channel.kinds() == ["post", "update"]
    assert "Reminder: review demo-1 has waited for a decision since" in b.channel.calls[-1][2]

    b.clock.advance(hours=1)
    settle(service, b)
    settle(service, b)
    assert b.channel.kinds() == ["post", "update", "escalate"]
    assert "Escalated: review demo-1" in b.channel.calls[-1][2]

    b.clock.advance(hours=1)
    settle(service, b)
    review = b.store.get_review(rid)
    assert review.status == "applied" and review.outcome is not None and review.outcome.timed_out
    assert review.outcome.decided_by == ["timeout"]
    final = b.store.get_run(run.id)
    assert final.status == "rejected" and "timed out after 3h" in (final.reason or "")
    # The outcome update reaches both the review message and the escalation message.
    assert [kind for kind in b.channel.kinds()[3:]] == ["update", "update"]
    assert "Timed out: REJECT" in b.channel.calls[-1][2]


def test_a_local_escalation_target_needs_no_other_channel(tmp_path: Path, caplog: Any) -> None:
    timeout = {"escalate_after": "2h", "escalate_to": [{"local": {}}]}
    b = bench(tmp_path, [demo(review={"timeout": timeout})])
    assert b.config.loops[0].review.to_policy().escalate_to == [{"local": {}}]
    service = service_for(b)
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.clock.advance(hours=2)
    with caplog.at_level(logging.WARNING):
        settle(service, b)
    assert b.channel.kinds() == ["post", "escalate"] and "Escalated: review demo-1" in b.channel.calls[-1][2]
    assert "not configured" not in caplog.text and "review demo-1 escalated" in caplog.text


def test_default_pause_keeps_the_review_open_and_quiet(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(review={"timeout": {"decide_after": "1h", "default": "pause"}})])
    service = service_for(b)
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.clock.advance(hours=2)
    settle(service, b)
    review = b.store.get_review(run.review_id)
    assert review.status == "open" and review.timed_out_at == b.clock.now
    assert b.store.get_run(run.id).status == "waiting"
    assert b.channel.kinds() == ["post", "update"] and "keeps waiting for a person" in b.channel.calls[-1][2]
    b.clock.advance(hours=5)
    settle(service, b)
    assert b.channel.kinds() == ["post", "update"]


def test_the_tick_thread_starts_and_stops(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    service = service_for(b)
    b.store.enqueue_request(RUN_REQUEST, {"loop": "demo"})
    service.start(0.01)
    try:
        wait_for(lambda: any(r.status == "waiting" for r in b.store.list_runs()), timeout=10, what="the run to pause")
    finally:
        service.stop()


def test_a_corrupt_document_does_not_stop_the_tick_thread(tmp_path: Path, caplog: Any) -> None:
    b = bench(tmp_path, [demo()])
    reviews = b.config.state_dir / "reviews"
    reviews.mkdir(parents=True)
    (reviews / "demo-1.json").write_text("{torn", encoding="utf-8")
    service = service_for(b)
    service.start(0.01)
    try:
        wait_for(lambda: caplog.text.count("tick failed") >= 2, timeout=10, what="two failed ticks")
    finally:
        service.stop()
    assert "demo-1.json" in caplog.text
