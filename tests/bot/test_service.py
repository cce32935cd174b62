"""One tick: run requests from the inbox, decided reviews applied, deadlines fired once each."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from bot.patterns import LoopSpec
from bot.desk import ReviewDesk, local_channel
from bot.review_records import Outcome, Review, ReviewPolicy, Vote
from bot.reviews import cast_vote
from bot.runner import Runner
from bot.service import RUN_REQUEST, Service
from bot.store import SqliteStore
from loop_engine.checkpoint import HumanDecision
from loop_engine.engine import LoopEngine
from loop_engine.types import LoopContext

from .runtime_support import T0, Bench, bench, db_execute, demo, wait_for

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


class ForgetfulStore(SqliteStore):
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
    # The outcome, then the run's end, reach both the review message and the escalation message.
    later = b.channel.calls[3:]
    assert [kind for kind, _, _ in later] == ["update"] * 4
    assert sum("Timed out: REJECT" in text for _, _, text in later) == 2
    assert sum(text.startswith(f"Run {run.id} rejected") for _, _, text in later) == 2


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
    assert "not configured" not in caplog.text
    assert caplog.text.count("Escalated") == 1 and "Escalated: review demo-1 has had no decision" in caplog.text
    assert "(escalated to local)" in caplog.text


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


class CountingStore(SqliteStore):
    """Counts the ticks that reach the reviews; ``fail_with`` makes that many of them raise it first."""

    def __init__(self, root: Path, fail_with: list[BaseException] | None = None) -> None:
        super().__init__(root)
        self.listings = 0
        self.fail_with = list(fail_with or [])

    def decided_reviews(self) -> list[Review]:
        self.listings += 1
        if self.fail_with:
            raise self.fail_with.pop(0)
        return super().decided_reviews()


def test_a_corrupt_document_does_not_stop_the_tick_thread_and_is_logged_once(tmp_path: Path, caplog: Any) -> None:
    store = CountingStore(tmp_path / "state")
    b = bench(tmp_path, [demo()], store=store)
    b.store.put_review(Review(id="demo-1", loop="demo", run_id="demo-run-1", checkpoint_id="checkpoint_0001",
                              request={}, policy=ReviewPolicy(), created_at=T0))
    db_execute(b.config.state_dir, "UPDATE reviews SET doc = '{torn', status = 'decided'")  # every tick reads it
    service = service_for(b)
    service.start(0.01)
    try:
        wait_for(lambda: store.listings >= 3, timeout=10, what="three ticks")
    finally:
        service.stop()
    # Set aside once, named in the log and in problems(); the ticks go on without failing.
    assert not [r for r in caplog.records if "tick failed" in r.getMessage()]
    named = [r for r in caplog.records if "loopbot.db reviews/demo-1" in r.getMessage() and r.levelno == logging.ERROR]
    assert len(named) == 1
    assert [p.split(":")[0] for p in store.problems()] == ["reviews/demo-1"]


def test_any_error_in_a_tick_is_logged_with_its_traceback_and_ticking_goes_on(tmp_path: Path, caplog: Any) -> None:
    store = CountingStore(tmp_path / "state", fail_with=[TypeError("can't compare offset-naive and offset-aware")])
    b = bench(tmp_path, [demo()], store=store)
    b.store.enqueue_request(RUN_REQUEST, {"loop": "demo"})
    service = service_for(b)
    service.start(0.01)
    try:
        wait_for(lambda: store.listings >= 3, timeout=10, what="ticks after the failed one")
        assert service.problem() is None
    finally:
        service.stop()
    [failure] = [r for r in caplog.records if "tick failed" in r.getMessage()]
    assert failure.exc_info is not None and "offset-naive" in failure.getMessage()
    assert "Traceback" in caplog.text


class BrokenRunner(Runner):
    """A runner that cannot apply one review; the others must still be applied."""

    def apply_decided(self, review_id: str) -> bool:
        if review_id == "demo-1":
            raise RuntimeError("review demo-1 is broken")
        return super().apply_decided(review_id)


def test_one_review_that_fails_does_not_stop_the_others(tmp_path: Path, caplog: Any) -> None:
    b = bench(tmp_path, [demo(overlap="allow")])
    desk = ReviewDesk(b.store, {"local": b.channel}, clock=b.clock, inline=True)
    runner = BrokenRunner(b.config, b.store, desk, clock=b.clock)
    first, second = runner.run_foreground("demo"), runner.run_foreground("demo")
    assert first is not None and second is not None and (first.review_id, second.review_id) == ("demo-1", "demo-2")
    for rid in ("demo-1", "demo-2"):
        b.store.update_review(rid, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE), now=T0))
    service = Service(b.store, runner, clock=b.clock)
    for _ in range(3):
        service.tick()
        assert runner.join(10)
    assert b.store.get_run(second.id).status == "completed"
    assert b.store.get_review("demo-1").status == "decided"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "review demo-1 could not be applied" in errors[0].getMessage()
    assert errors[0].exc_info is not None


def test_a_corrupt_inbox_request_is_set_aside_once_and_the_rest_still_moves(tmp_path: Path, caplog: Any) -> None:
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.store.update_review(run.review_id, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE), now=T0))
    db_execute(b.config.state_dir, "INSERT INTO inbox (id, num, kind, payload, created_at)"
               " VALUES ('request-7', 7, 'run', '{torn', '2026-03-02T09:00:00.000000+00:00')")
    service = service_for(b)
    settle(service, b)
    settle(service, b)
    assert b.store.get_run(run.id).status == "completed"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "inbox/request-7: damaged payload" in errors[0].getMessage()
    assert [p.split(":")[0] for p in b.store.problems()] == ["inbox/request-7"]
    later = b.store.enqueue_request("run", {"loop": "demo", "trigger": "cli"})
    assert [r.id for r in b.store.take_requests()] == [later]  # the inbox is not blocked


def test_an_outcome_the_run_refuses_fails_run_and_review_once(tmp_path: Path, caplog: Any) -> None:
    """A review decided before votes were checked (modify note=x): applying it fails once, not every poll."""
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    rid = run.review_id

    def decided_with_a_bad_change(review: Review) -> None:
        review.outcome = Outcome(HumanDecision.MODIFY, ["local:bob"], T0, modifications={"note": "x"})
        review.status = "decided"

    b.store.update_review(rid, decided_with_a_bad_change)
    service = service_for(b)
    settle(service, b)
    failed = b.store.get_run(run.id)
    review = b.store.get_review(rid)
    assert failed.status == "failed" and "review demo-1's modify could not be applied" in (failed.reason or "")
    assert "unknown modification key" in (failed.reason or "")
    assert review.status == "failed" and review.error == failed.reason
    assert "Failed: review demo-1's modify could not be applied" in b.channel.calls[-1][2]
    updated_at = failed.updated_at
    settle(service, b)
    settle(service, b)
    assert b.store.get_run(run.id).updated_at == updated_at
    assert caplog.text.count("could not be applied") == 1


def test_an_outcome_whose_resume_crashes_fails_run_and_review_once(
    tmp_path: Path, caplog: Any, monkeypatch: Any
) -> None:
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.store.update_review(run.review_id, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE), now=T0))

    def crash(*args: Any) -> Any:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(LoopEngine, "continue_saved", crash)
    service = service_for(b)
    settle(service, b)
    settle(service, b)
    assert b.store.get_run(run.id).status == "failed" and b.store.get_review(run.review_id).status == "failed"
    assert "could not be applied: engine bug" in (b.store.get_run(run.id).reason or "")
    assert caplog.text.count("could not be applied") == 1 and "Traceback" in caplog.text


def test_the_escalation_entry_in_the_local_review_file_says_escalated_once(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(review={"timeout": {"escalate_after": "2h", "escalate_to": [{"local": {}}]}})])
    local = local_channel(b.config.state_dir)
    runner = Runner(b.config, b.store, ReviewDesk(b.store, {"local": local}, clock=b.clock, inline=True), clock=b.clock)
    run = runner.run_foreground("demo")
    assert run is not None and run.review_id
    b.clock.advance(hours=2)
    service = Service(b.store, runner, clock=b.clock)
    service.tick()
    assert runner.join(10)
    text = local.path_for(run.review_id).read_text(encoding="utf-8")
    assert "\n- Escalated: review demo-1 has had no decision since" in text
    assert text.count("Escalated") == 1


# -- /healthz's view of the tick ------------------------------------------------------


class Fatal(BaseException):
    """Not an Exception: gets past the per-tick guard, like a bug that kills the thread."""


def test_a_dead_tick_thread_is_a_problem_with_the_reason(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "state", fail_with=[Fatal("the thread is gone")])
    service = service_for(bench(tmp_path, [demo()], store=store))
    assert service.problem() is None  # not started: nothing to be late
    service.start(0.01)
    try:
        problem = wait_for(service.problem, timeout=10, what="the dead thread to be reported")
    finally:
        service.stop()
    assert problem == "the tick thread stopped: Fatal: the thread is gone"


class HangingStore(SqliteStore):
    """A tick that never completes (a stuck lock, a hung disk) until ``release`` is set."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()

    def list_reviews(self) -> list[Review]:
        self.release.wait(10)
        return super().list_reviews()


@pytest.mark.parametrize(("interval", "limit"), [(1.0, 30), (5.0, 50)])
def test_a_tick_that_has_not_completed_for_long_is_a_problem(tmp_path: Path, interval: float, limit: int) -> None:
    store = HangingStore(tmp_path / "state")
    b = bench(tmp_path, [demo()], store=store)
    service = service_for(b)
    service.start(interval)
    try:
        b.clock.advance(seconds=limit)
        assert service.problem() is None
        b.clock.advance(seconds=1)
        assert service.problem() == f"no tick has completed for {limit + 1}s, more than {limit}s (a tick may be stuck)"
    finally:
        store.release.set()
        service.stop()


def exploding_build(options: dict[str, Any]) -> LoopSpec:
    """A loop whose engine can no longer be built: its factory broke after a run paused."""

    def engine_factory(**_: Any) -> Any:
        raise RuntimeError("engine wiring is broken")

    return LoopSpec(engine_factory=engine_factory, context_factory=LoopContext)


@pytest.mark.parametrize(
    ("loop", "why", "traceback"),
    [
        (demo("other"), 'unknown loop "demo". Loops in the config: other', False),
        (
            {"name": "demo", "factory": f"{__name__}:exploding_build"},
            f"cannot build loop demo: {__name__}:exploding_build: engine_factory raised RuntimeError: "
            "engine wiring is broken",
            True,  # a bug in the factory: worth its traceback, once
        ),
    ],
    ids=["loop-renamed", "engine-factory-raises"],
)
def test_a_decided_review_whose_loop_cannot_be_built_fails_run_and_review_once(
    tmp_path: Path, caplog: Any, loop: dict[str, Any], why: str, traceback: bool
) -> None:
    b = bench(tmp_path, [demo()])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id
    rid = run.review_id
    b.store.update_review(rid, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE), now=T0))
    changed = bench(tmp_path, [loop])  # the config changed while the review waited
    service = service_for(changed)
    with caplog.at_level(logging.INFO, logger="bot.runner"):
        for _ in range(3):
            settle(service, changed)
    failed, review = changed.store.get_run(run.id), changed.store.get_review(rid)
    assert (failed.status, review.status) == ("failed", "failed")
    assert failed.reason == (
        f"review demo-1's approve could not be applied: {why} (voted by local:bob at {T0.isoformat()})"
    )
    assert review.error == failed.reason
    assert caplog.text.count("could not be applied") == 1 and caplog.text.count("applying review demo-1") == 1
    assert ("Traceback" in caplog.text) is traceback
