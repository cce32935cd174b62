"""The runner: pause -> review stored then posted; outcome -> resume exactly once; recovery; overlap."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import contextlib

from bot.patterns import LoopSpec, get_pattern
from bot.review_records import Review, Vote
from bot.reviews import cast_vote
from bot.store import SqliteStore
from bot.store.engines import DB_NAME, Sqlite
from bot.run_report import result_text
from bot.loop_catalog import UnknownLoopError
from loop_engine.checkpoint import HumanDecision
from loop_engine.deserialization import state_from_dict
from loop_engine.types import LoopContext, LoopState

from .runtime_support import T0, Bench, bench, db_execute, demo, wait_for
from .slow_loop import trail_lines


class Crash(BaseException):
    """Stands in for kill -9: not an Exception, so no boundary turns it into a result."""


class CrashingStore(SqliteStore):
    """Dies on the n-th snapshot save, after it was written (the process is gone, the file is there)."""

    def __init__(self, root: Path, crash_on_save: int) -> None:
        super().__init__(root)
        self.saves = 0
        self.crash_on_save = crash_on_save

    def save_state(self, run_id: str, state: LoopState) -> None:
        super().save_state(run_id, state)
        self.saves += 1
        if self.saves == self.crash_on_save:
            raise Crash(f"killed after save {self.saves}")


def vote(b: Bench, review_id: str, decision: HumanDecision, who: str = "alice", feedback: str = "") -> None:
    result = b.store.update_review(
        review_id, lambda r: cast_vote(r, Vote(f"local:{who}", decision, feedback=feedback), now=T0)
    )
    assert result.accepted, result.message


def paused(tmp_path: Path, **loop: Any) -> tuple[Bench, str, str]:
    b = bench(tmp_path, [demo(**loop)])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.status == "waiting"
    assert run.review_id is not None
    return b, run.id, run.review_id


def test_a_pause_stores_the_review_then_posts_it(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    review = b.store.get_review(review_id)
    assert (review.id, review.run_id, review.status) == ("demo-1", run_id, "open")
    assert review.checkpoint_id == "checkpoint_0001"
    assert review.request["checkpoint_id"] == review.checkpoint_id
    assert review.policy.reviewers.local == ["alice", "bob"]
    assert b.channel.calls == [("post", "demo-1", "checkpoint_0001")]
    assert review.posts == [{"channel": "local", "data": {"review_id": "demo-1", "at": "local"}, "target": "local"}]
    assert b.store.get_run(run_id).review_id == "demo-1"


def test_approve_resumes_to_completion_and_marks_the_review_applied(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)
    b.runner.apply_outcome(review_id)

    run = b.store.get_run(run_id)
    assert run.status == "completed" and run.reason is None
    assert run.result is not None and run.result["steps"] == {
        "collect": "verified_completed", "propose": "verified_completed",
        "apply": "verified_completed", "report": "verified_completed",
    }
    review = b.store.get_review(review_id)
    assert review.status == "applied" and review.applied_at is not None
    assert b.channel.calls[-2][0] == "update" and "APPROVE by local:alice" in b.channel.calls[-2][2]
    kind, rid, text = b.channel.calls[-1]  # one line when the run ends, with a summary of its result
    assert (kind, rid) == ("update", review_id) and "\n" not in text
    assert text == (f"Run {run_id} completed. Result: 4 iteration(s); 4 of 4 steps done; "
                    "labelled 3 issues: bug 1, documentation 1, enhancement 1")  # the demo's summarize, not JSON
    assert run.result["summary"] == "labelled 3 issues: bug 1, documentation 1, enhancement 1"


def test_reject_ends_the_run_rejected_with_the_reason(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.REJECT, feedback="wrong labels")
    b.runner.apply_outcome(review_id)
    run = b.store.get_run(run_id)
    assert (run.status, run.reason) == ("rejected", "wrong labels")


def test_apply_in_a_worker_thread(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    assert b.runner.apply_decided(review_id) is False  # still open: nothing to apply
    vote(b, review_id, HumanDecision.APPROVE)
    assert b.runner.apply_decided(review_id) is True
    assert b.runner.join(10)
    assert b.store.get_run(run_id).status == "completed"
    assert b.runner.apply_decided(review_id) is False  # applied: never twice


def test_a_decision_recorded_before_a_crash_is_not_applied_twice(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)
    crashing = bench(tmp_path, [demo()], store=CrashingStore(b.config.state_dir, crash_on_save=1))
    with pytest.raises(Crash):
        crashing.runner.apply_outcome(review_id)  # dies right after the engine saved the decision
    state = state_from_dict(b.store.load_snapshot(run_id))
    assert [d.decision for d in state.decisions] == [HumanDecision.APPROVE] and state.pending_review is None
    assert b.store.get_review(review_id).status == "decided"

    restarted = bench(tmp_path, [demo()])
    restarted.runner.recover()  # the run is "running" with a decided review: left to apply_decided
    assert restarted.runner.join(10)
    assert restarted.runner.apply_decided(review_id)
    assert restarted.runner.join(10)
    assert b.store.get_run(run_id).status == "completed"
    final = state_from_dict(b.store.load_snapshot(run_id))
    assert [d.decision for d in final.decisions] == [HumanDecision.APPROVE]
    assert b.store.get_review(review_id).status == "applied"


def test_a_run_killed_mid_iteration_continues_from_its_snapshot(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()], store=CrashingStore(tmp_path / "state", crash_on_save=3))
    with pytest.raises(Crash):
        b.runner.run_foreground("demo")
    run = b.store.get_run("demo-run-1")
    assert run.status == "running" and run.review_id is None

    restarted = bench(tmp_path, [demo()])
    restarted.runner.recover()
    assert restarted.runner.join(10)
    run = restarted.store.get_run("demo-run-1")
    assert run.status == "waiting" and run.review_id == "demo-1"
    assert [r.id for r in restarted.store.list_reviews()] == ["demo-1"]


def test_recovery_finds_a_review_stored_before_the_crash_instead_of_opening_another(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)

    def crashed_before_update(run: Any) -> None:
        run.status, run.review_id = "running", None

    b.store.update_run(run_id, crashed_before_update)
    restarted = bench(tmp_path, [demo()])
    restarted.runner.recover()
    assert restarted.runner.join(10)
    assert [r.id for r in restarted.store.list_reviews()] == [review_id]
    run = restarted.store.get_run(run_id)
    assert (run.status, run.review_id) == ("waiting", review_id)
    assert restarted.channel.calls == []  # already posted before the crash: not posted twice


def test_recovery_reposts_a_waiting_review_that_was_never_posted(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)

    def as_if_killed_before_posting(review: Review) -> None:  # stored, then kill -9 before desk.open
        review.posts.clear()
        review.targets.clear()

    b.store.update_review(review_id, as_if_killed_before_posting)
    restarted = bench(tmp_path, [demo()])
    restarted.runner.recover()
    assert restarted.channel.kinds() == ["post"]
    assert b.store.get_review(review_id).posts
    restarted.runner.recover()  # posted (its targets recorded): a second restart posts nothing more
    assert restarted.channel.kinds() == ["post"]


def test_overlap_skip_names_the_active_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    b, run_id, review_id = paused(tmp_path)
    with caplog.at_level(logging.INFO, logger="bot.runner"):
        assert b.runner.request_run("demo", trigger="schedule") is None
    assert f"run {run_id} is still waiting on review {review_id}" in caplog.text
    assert len(b.store.list_runs()) == 1


def test_overlap_allow_starts_another_run(tmp_path: Path) -> None:
    b, run_id, _ = paused(tmp_path, overlap="allow")
    second = b.runner.request_run("demo", trigger="schedule")
    assert second == "demo-run-2"
    assert b.runner.join(10)
    assert b.store.get_run(second).status == "waiting"
    assert [r.id for r in b.store.list_reviews()] == ["demo-1", "demo-2"]


def test_unknown_loop_suggests_the_close_name(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    with pytest.raises(UnknownLoopError, match='did you mean "demo"'):
        b.runner.run_foreground("dmeo")


def test_shutdown_refuses_new_runs(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    assert b.runner.shutdown(timeout=1) is True
    assert b.runner.request_run("demo", trigger="schedule") is None
    assert b.store.list_runs() == []


def test_a_run_whose_loop_left_the_config_fails_with_the_reason(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)
    renamed = bench(tmp_path, [demo("other")])
    renamed.runner.recover()  # waiting run of an unknown loop: no crash, nothing to post
    assert renamed.runner.apply_decided(review_id)
    assert renamed.runner.join(10)
    run = renamed.store.get_run(run_id)
    assert run.status == "failed" and 'unknown loop "demo"' in (run.reason or "")


def test_a_decided_review_without_its_snapshot_fails_run_and_review_once(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)
    db_execute(b.config.state_dir, "DELETE FROM snapshots")  # nothing to resume: retrying cannot help
    assert b.runner.apply_decided(review_id)
    assert b.runner.join(10)
    run = b.store.get_run(run_id)
    assert run.status == "failed" and "no snapshot" in (run.reason or "")
    assert b.store.get_review(review_id).status == "failed"
    assert not b.runner.apply_decided(review_id)  # never retried by the next tick


def test_a_decided_review_whose_snapshot_is_unreadable_fails_once_naming_it(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)
    db_execute(b.config.state_dir, "UPDATE snapshots SET data = ?", (b"{torn",))
    b.runner.apply_outcome(review_id)
    run = b.store.get_run(run_id)
    assert run.status == "failed" and f"loopbot.db snapshots/{run_id}" in (run.reason or "")
    review = b.store.get_review(review_id)
    assert review.status == "failed"
    assert not b.runner.apply_decided(review_id)


def test_an_internal_error_in_a_worker_is_recorded_on_the_run(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.APPROVE)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the runner")

    b.runner._settle = broken  # type: ignore[method-assign]  # a bug-shaped failure after the resume
    assert b.runner.apply_decided(review_id)
    assert b.runner.join(10)
    run = b.store.get_run(run_id)
    assert run.status == "failed"
    reason = run.reason or ""
    assert reason.startswith("internal error: RuntimeError(") and "a bug in the runner" in reason


def slow(trail: Path, **options: Any) -> dict[str, Any]:
    return {"name": "slow", "factory": "tests.bot.slow_loop:build", "options": {"trail": str(trail), **options}}


def test_shutdown_lets_the_running_step_finish_then_the_next_start_goes_on(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    b = bench(tmp_path, [slow(trail, steps=4, delay=0.3)])
    run_id = b.runner.request_run("slow", trigger="cli")
    wait_for(lambda: "start step_2" in trail.read_text() if trail.exists() else False, timeout=10, what="step 2")
    assert b.runner.shutdown(timeout=5) is True
    lines = trail_lines(trail)
    assert lines[-1].startswith("done step_2")  # the step in flight finished; no other started
    assert b.store.get_run(run_id).status == "running"  # left for the next start
    state = state_from_dict(b.store.load_snapshot(run_id))
    assert [s.status.value for s in state.current_plan.steps][:2] == ["verified_completed"] * 2

    restarted = bench(tmp_path, [slow(trail, steps=4, delay=0.01)])
    restarted.runner.recover()
    assert restarted.runner.join(10)
    assert restarted.store.get_run(run_id).status == "completed"
    starts = [line.split()[1] for line in trail_lines(trail) if line.startswith("start")]
    assert starts == ["step_1", "step_2", "step_3", "step_4"]  # nothing ran twice


class _CrashingSqlite(Sqlite):
    """Dies right after its n-th committed write transaction (runs, reviews, snapshots, counters, outbox): kill -9
    then, with everything committed so far on disk and nothing after it."""

    def __init__(self, path: Path, crash_at: int) -> None:
        super().__init__(path)
        self.writes = 0
        self.crash_at = crash_at

    @contextlib.contextmanager
    def write(self) -> Iterator[Any]:
        with super().write() as cur:
            yield cur
        self.writes += 1
        if self.writes == self.crash_at:
            raise Crash(f"killed after write {self.writes}")


class CrashAfterWrite(SqliteStore):
    """A store whose engine dies right after its n-th committed write (``_CrashingSqlite``)."""

    def __init__(self, root: Path, crash_at: int) -> None:
        super().__init__(root)
        self.engine.close()
        self.engine = self.crashing = _CrashingSqlite(Path(root) / DB_NAME, crash_at)

    @property
    def writes(self) -> int:
        return self.crashing.writes


def restart_until_settled(tmp_path: Path) -> Bench:
    """What a fresh `serve` does: recover, then the tick applies decided reviews."""
    b = bench(tmp_path, [demo()])
    b.runner.recover()
    assert b.runner.join(10)
    for review in b.store.list_reviews():
        if review.status == "decided":
            assert b.runner.apply_decided(review.id)
            assert b.runner.join(10)
    return b


def writes_of(tmp_path: Path, action: Any) -> int:
    (tmp_path / "count").mkdir()
    counting = CrashAfterWrite(tmp_path / "count" / "state", crash_at=0)
    action(bench(tmp_path / "count", [demo()], store=counting))
    return counting.writes


def start_and_approve(b: Bench) -> None:
    run = b.runner.run_foreground("demo")
    assert run is not None and run.review_id is not None
    vote(b, run.review_id, HumanDecision.APPROVE)
    b.runner.apply_outcome(run.review_id)


def test_a_kill_after_any_write_loses_no_vote_and_applies_the_outcome_once(tmp_path: Path) -> None:
    total = writes_of(tmp_path, start_and_approve)
    assert total > 10  # counters, run, snapshots, review, vote, posts, applied: every one is a crash point
    for crash_at in range(1, total + 1):
        root = tmp_path / f"crash-{crash_at}"
        root.mkdir()
        crashing = bench(root, [demo()], store=CrashAfterWrite(root / "state", crash_at))
        with pytest.raises(Crash):
            start_and_approve(crashing)
        b = restart_until_settled(root)
        if not b.store.list_runs(archived=True):  # died before the run record existed: the person runs it again
            start_and_approve(b)
        for review in b.store.list_reviews():
            if review.status == "open":  # died before the vote was recorded: the person votes again
                vote(b, review.id, HumanDecision.APPROVE)
        b = restart_until_settled(root)

        where = f"killed after write {crash_at} of {total}"
        (review,) = b.store.list_reviews(archived=True)  # one pause, one review, never a second (ids may skip)
        assert review.status == "applied" and review.outcome is not None, where
        assert [v.voter for v in review.votes] == ["local:alice"], where
        (run,) = b.store.list_runs(archived=True)
        assert (run.status, run.review_id) == ("completed", review.id), where
        state = state_from_dict(b.store.load_snapshot(run.id))
        decisions = [(d.checkpoint_id, d.decision) for d in state.decisions]
        assert decisions == [("checkpoint_0001", HumanDecision.APPROVE)], where


# -- a run whose loop cannot be built, or whose engine blows up, never stays "running" --------


def exploding_build(options: dict[str, Any]) -> LoopSpec:
    """A factory whose engine cannot even be made: a bug in user code, found only when a run starts."""

    def engine_factory(**_: Any) -> Any:
        raise RuntimeError("engine wiring is broken")

    return LoopSpec(engine_factory=engine_factory, context_factory=LoopContext)


def test_a_foreground_run_of_an_unknown_pattern_fails_saying_why_and_frees_the_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = bench(tmp_path, [{"name": "a", "pattern": "demoo"}])
    run = b.runner.run_foreground("a")
    assert run is not None and run.status == "failed"
    assert run.reason is not None and run.reason.startswith('cannot build loop a: unknown pattern "demoo"')
    assert 'did you mean "demo"?' in run.reason
    assert [r.exc_info for r in caplog.records if r.levelno >= logging.ERROR] == [None]  # no traceback
    again = b.runner.run_foreground("a")  # not "already has an active run"
    assert again is not None and again.id == "a-run-2" and again.status == "failed"


def test_a_server_run_of_a_factory_that_does_not_import_fails_saying_why(tmp_path: Path) -> None:
    b = bench(tmp_path, [{"name": "a", "factory": "nosuch.mod:build"}])
    run_id = b.runner.request_run("a", trigger="schedule")
    assert run_id is not None and b.runner.join(10)
    run = b.store.get_run(run_id)
    assert run.status == "failed"
    assert (run.reason or "").startswith(
        'cannot build loop a: cannot import nosuch.mod: module "nosuch" not found; is it installed or on PYTHONPATH?'
    )
    assert "Looked in" in (run.reason or "")  # where it looked, so the fix is obvious


def test_a_foreground_run_whose_engine_raises_is_recorded_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    b = bench(tmp_path, [{"name": "a", "factory": f"{__name__}:exploding_build"}])
    run = b.runner.run_foreground("a")
    assert run is not None and run.status == "failed"
    assert run.reason == (
        f"cannot build loop a: {__name__}:exploding_build: engine_factory raised RuntimeError: engine wiring is broken"
    )
    assert "Traceback" in caplog.text  # a bug in the factory: its traceback is worth showing


def test_a_stopped_foreground_run_stays_running_with_its_snapshot_for_serve(tmp_path: Path) -> None:
    """Ctrl-C on `loopbot run` asks the runner to stop: saved at a step boundary, never failed."""
    trail = tmp_path / "trail"
    b = bench(tmp_path, [slow(trail, steps=3, delay=0.01)])
    b.runner.request_stop()
    run = b.runner.run_foreground("slow")
    assert run is not None and (run.status, run.reason) == ("running", None)
    assert b.store.load_snapshot(run.id) is not None
    restarted = bench(tmp_path, [slow(trail, steps=3, delay=0.01)])
    restarted.runner.recover()
    assert restarted.runner.join(10)
    assert restarted.store.get_run(run.id).status == "completed"
    starts = [line.split()[1] for line in trail_lines(trail) if line.startswith("start")]
    assert starts == ["step_1", "step_2", "step_3"]  # nothing ran twice


# -- the audit trail (issue 13, item 6) -------------------------------------------------------------------


def test_every_vote_pauses_included_reaches_the_review_the_json_and_the_runs_markdown(tmp_path: Path) -> None:
    from datetime import timedelta

    from bot.run_report import RUNS_MARKDOWN
    from bot.status import review_view

    b, run_id, review_id = paused(tmp_path, review={"approvals_required": 2})
    pause = Vote("local:alice", HumanDecision.PAUSE, feedback="2h", at=T0)
    b.store.update_review(review_id, lambda r: cast_vote(r, pause, now=T0))
    assert b.store.get_review(review_id).paused_until is not None
    later = T0 + timedelta(minutes=5)
    for who in ("alice", "bob"):
        b.store.update_review(
            review_id, lambda r, who=who: cast_vote(r, Vote(f"local:{who}", HumanDecision.APPROVE), now=later)
        )
    review = b.store.get_review(review_id)
    assert [v.decision for v in review.votes] == [HumanDecision.APPROVE, HumanDecision.APPROVE]  # one per person
    assert [(v.voter, v.decision, v.at) for v in review.history] == [
        ("local:alice", HumanDecision.PAUSE, T0),
        ("local:alice", HumanDecision.APPROVE, later),
        ("local:bob", HumanDecision.APPROVE, later),
    ]
    assert review.paused_until is None  # decided: the pause is over
    assert [h["decision"] for h in review_view(review)["history"]] == ["pause", "approve", "approve"]

    b.runner.apply_outcome(review_id)
    updates = [text for kind, rid, text in b.channel.calls if kind == "update" and rid == review_id]
    votes = next(text for text in updates if text.startswith("Votes, as cast:"))
    assert f"- {T0.isoformat(timespec='seconds')} local:alice pause" in votes
    assert votes.count(" approve ") == 2
    audit = (tmp_path / "state" / RUNS_MARKDOWN / f"{run_id}.md").read_text(encoding="utf-8")
    assert f"# Run {run_id}" in audit and "- **Status:** completed" in audit
    assert "- **Result:** 4 iteration(s); 4 of 4 steps done" in audit
    assert f"## Review {review_id} (" in audit and "0001): applied" in audit
    assert "Decided: APPROVE by local:alice, local:bob" in audit
    assert audit.index("local:alice pause") < audit.index("local:bob approve")


def test_a_failed_run_writes_why_to_its_markdown(tmp_path: Path) -> None:
    from bot.run_report import RUNS_MARKDOWN

    b, run_id, review_id = paused(tmp_path)
    vote(b, review_id, HumanDecision.REJECT, feedback="wrong labels")
    b.runner.apply_outcome(review_id)
    audit = (tmp_path / "state" / RUNS_MARKDOWN / f"{run_id}.md").read_text(encoding="utf-8")
    assert "- **Status:** rejected - wrong labels" in audit and "local:alice reject" in audit


def test_an_outcome_that_cannot_be_applied_says_who_voted_for_it(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    db_execute(tmp_path / "state", "DELETE FROM snapshots")
    vote(b, review_id, HumanDecision.APPROVE, who="bob")
    b.runner.apply_outcome(review_id)
    reason = b.store.get_run(run_id).reason or ""
    assert "could not be applied" in reason and "(voted by local:bob at " in reason
    assert b.store.get_review(review_id).error == reason


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        ({"kind": "report", "summary": "P0 1, P1 2; applied 3, skipped 1", "applied": 3},
         "4 iteration(s); P0 1, P1 2; applied 3, skipped 1"),
        ({"did": "x"}, '4 iteration(s); output: {"did": "x"}'),
        (None, "4 iteration(s)"),
    ],
)
def test_a_runs_end_line_shows_the_summary_its_loop_worded(output: Any, shown: str) -> None:
    assert result_text({"iterations": 4, "output": output}) == shown


def test_a_waiting_run_whose_review_was_set_aside_fails_and_frees_its_loop(tmp_path: Path) -> None:
    b, run_id, review_id = paused(tmp_path)
    db_execute(b.config.state_dir, "UPDATE reviews SET doc = '{torn'")
    restarted = bench(tmp_path, [demo()])
    restarted.runner.recover()
    run = restarted.store.get_run(run_id)
    assert run.status == "failed" and f"its review {review_id} could not be read" in (run.reason or "")
    assert f"loopbot.db reviews/{review_id}" in (run.reason or "")  # the damaged row, named
    assert restarted.runner.request_run("demo", trigger="schedule") is not None  # overlap: skip no longer blocks
    assert restarted.runner.join(10)


def demo_with_a_broken_summary(options: dict[str, Any]) -> LoopSpec:
    """The demo loop whose summarize hook fails: a bug in user code at the run's very end."""

    def summarize(result: Any) -> str:
        raise KeyError("report")

    return replace(get_pattern("demo")(options), summarize=summarize)


def test_a_failing_summarize_hook_still_tells_the_runs_end_with_its_output(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loop = demo()
    del loop["pattern"]
    b = bench(tmp_path, [{**loop, "factory": f"{__name__}:demo_with_a_broken_summary"}])
    run_id, review_id = "demo-run-1", "demo-1"
    assert b.runner.run_foreground("demo") is not None
    vote(b, review_id, HumanDecision.APPROVE)
    b.runner.apply_outcome(review_id)
    run = b.store.get_run(run_id)
    assert run.status == "completed" and "summary" not in (run.result or {})
    assert b.channel.calls[-1][2].startswith(f"Run {run_id} completed. Result: 4 iteration(s); 4 of 4 steps done; "
                                             "output: {")
    assert "loop demo: summarize(result) failed" in caplog.text


def test_the_loops_own_summary_is_shown_instead_of_its_output() -> None:
    result = {"iterations": 2, "summary": "labelled 3 issues", "output": {"report": {"x": 1}}}
    assert result_text(result) == "2 iteration(s); labelled 3 issues"
