"""The Store contract, continued: hot set and archive, the tick's queries, the outbox, dedupe keys, states.

Parametrised over the same implementations as test_store_contract.py.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest

from bot.review_deadlines import decide_by_timeout
from bot.review_records import Review, ReviewPolicy, Vote
from bot.reviews import cast_vote, mark_applied, mark_failed
from bot.store import CorruptDocumentError, NewerFormatError, OutboxTask, RunRecord, Store, StoreError
from bot.store import UnknownReviewError, UnknownTaskError
from loop_engine.checkpoint import CheckpointTrigger, HumanDecision, ReviewRequest
from loop_engine.proposal import ChangeList, Proposal, Table
from loop_engine.types import LoopState, LoopStatus, Plan, Step

from .test_store_contract import recorded, IMPLS, T0, Impl, make_review, make_run, make_task

H = timedelta(hours=1)


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


@pytest.fixture
def store(impl: Impl, tmp_path: Path) -> Store:
    return impl.open(tmp_path / "state")


def review(review_id: str, minutes: int = 0, run_id: str = "demo-run-1", checkpoint: str = "checkpoint_0001",
           **policy: timedelta) -> Review:
    made = make_review(review_id, created_at=T0 + timedelta(minutes=minutes))
    made.run_id, made.checkpoint_id = run_id, checkpoint
    made.policy = ReviewPolicy(**policy)  # type: ignore[arg-type]
    return made


def approve(r: Review) -> None:
    assert cast_vote(r, Vote("local:alice", HumanDecision.APPROVE), now=T0).accepted


def ids(records: list[Review] | list[RunRecord] | list[OutboxTask]) -> list[str]:
    return [r.id for r in records]


# -- reviews: hot set, archive, queries ----------------------------------------


def test_applied_and_failed_reviews_leave_the_hot_set_but_stay_readable(store: Store) -> None:
    for n in (1, 2, 3, 4):
        store.put_review(review(f"demo-{n}", minutes=n))
    store.update_review("demo-1", approve)
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    store.update_review("demo-2", approve)
    store.update_review("demo-2", lambda r: mark_failed(r, "refused"))
    store.update_review("demo-3", approve)
    assert ids(store.list_reviews()) == ["demo-3", "demo-4"]
    assert ids(store.list_reviews(archived=True)) == ["demo-1", "demo-2", "demo-3", "demo-4"]
    assert ids(store.open_reviews()) == ["demo-4"] and ids(store.decided_reviews()) == ["demo-3"]
    assert store.get_review("DEMO-1").status == "applied" and store.get_review("demo-2").error == "refused"
    assert store.counts()["open_reviews"] == 1 and store.counts()["decided_reviews"] == 1


def test_open_reviews_with_a_limit_are_the_first_in_creation_order(store: Store) -> None:
    for n in (3, 1, 4, 2, 5):
        store.put_review(review(f"demo-{n}", minutes=n))
    store.update_review("demo-2", approve)
    assert ids(store.open_reviews(limit=2)) == ["demo-1", "demo-3"]
    assert ids(store.open_reviews(limit=10)) == ids(store.open_reviews()) == ["demo-1", "demo-3", "demo-4", "demo-5"]
    assert store.open_reviews(limit=0) == []


def test_an_archived_review_can_still_be_updated_but_not_reopened(store: Store) -> None:
    store.put_review(review("demo-1"))
    store.update_review("demo-1", approve)
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    store.update_review("demo-1", lambda r: r.posts.append({"channel": "local"}))
    assert store.get_review("demo-1").posts == [{"channel": "local"}]
    with pytest.raises(StoreError):
        store.update_review("demo-1", lambda r: setattr(r, "status", "open"))
    assert store.get_review("demo-1").status == "applied" and store.open_reviews() == []


def test_unknown_review_suggests_archived_ids_too(store: Store) -> None:
    store.put_review(review("triage-17"))
    store.update_review("triage-17", approve)
    store.update_review("triage-17", lambda r: mark_applied(r, now=T0))
    with pytest.raises(UnknownReviewError, match='did you mean "triage-17"'):
        store.get_review("triage-71")


def test_due_reviews_follow_the_review_rules_to_the_microsecond(store: Store) -> None:
    def due_from(when: datetime) -> list[str]:
        assert store.due_reviews(when - timedelta(microseconds=1)) == []
        return ids(store.due_reviews(when))

    assert store.due_reviews(T0 + 1000 * H) == []
    store.put_review(review("demo-1", remind_after=2 * H))
    store.put_review(review("demo-2", minutes=1, decide_after=H))
    store.put_review(review("demo-3", minutes=2))  # no deadlines at all
    assert due_from(T0 + timedelta(minutes=1) + H) == ["demo-2"]
    assert ids(store.due_reviews(T0 + 3 * H)) == ["demo-1", "demo-2"]
    store.update_review("demo-2", lambda r: decide_by_timeout(r, now=T0 + 2 * H))
    assert due_from(T0 + 2 * H) == ["demo-1"] and ids(store.decided_reviews()) == ["demo-2"]
    store.update_review("demo-1", lambda r: cast_vote(r, Vote("local:a", HumanDecision.PAUSE, "5h"), now=T0))
    assert due_from(T0 + 7 * H) == ["demo-1"]  # counts from the pause end


def test_review_for_run_finds_the_newest_hot_or_archived(store: Store) -> None:
    assert store.review_for_run("demo-run-1") is None
    store.put_review(review("demo-1", run_id="demo-run-1", checkpoint="checkpoint_0001"))
    store.put_review(review("demo-2", minutes=5, run_id="demo-run-1", checkpoint="checkpoint_0002"))
    store.put_review(review("demo-3", minutes=9, run_id="demo-run-2"))
    store.update_review("demo-1", approve)
    store.update_review("demo-1", lambda r: mark_applied(r, now=T0))
    found = store.review_for_run("DEMO-RUN-1")
    assert found is not None and found.id == "demo-2"
    first = store.review_for_run("demo-run-1", "checkpoint_0001")
    assert first is not None and (first.id, first.status) == ("demo-1", "applied")
    assert store.review_for_run("demo-run-1", "checkpoint_0009") is None


# -- runs ----------------------------------------------------------------------


def test_ended_runs_are_archived_and_recent_runs_lists_the_latest(store: Store) -> None:
    for n in range(1, 15):
        store.put_run(make_run(f"demo-run-{n}", created_at=T0 + timedelta(minutes=n), trigger=f"request-{n}"))
    store.put_run(make_run("other-run-1", loop="other", status="waiting", created_at=T0))
    for n in range(1, 13):
        store.update_run(f"demo-run-{n}", lambda r: setattr(r, "status", "completed"))
    assert ids(store.list_runs()) == ["other-run-1", "demo-run-13", "demo-run-14"]
    assert len(store.list_runs(archived=True)) == 15
    assert ids(store.recent_runs(3)) == ["demo-run-10", "demo-run-11", "demo-run-12"]
    assert ids(store.recent_runs()) == [f"demo-run-{n}" for n in range(3, 13)]
    assert store.recent_runs(0) == []
    assert ids(store.active_runs()) == ["other-run-1", "demo-run-13", "demo-run-14"]
    assert ids(store.active_runs(status="running")) == ["demo-run-13", "demo-run-14"]
    active = store.active_run("demo")
    assert active is not None and active.id == "demo-run-13"
    assert store.active_run("nope") is None
    by_trigger = store.run_with_trigger("request-14")
    assert by_trigger is not None and by_trigger.id == "demo-run-14"
    assert store.counts()["runs"] == {"running": 2, "waiting": 1}
    assert store.get_run("demo-run-1").status == "completed"
    store.update_run("demo-run-1", lambda r: setattr(r, "reason", "noted later"))
    assert store.get_run("demo-run-1").reason == "noted later"
    with pytest.raises(StoreError):
        store.update_run("demo-run-1", lambda r: setattr(r, "status", "running"))


def test_run_counts_count_every_run_by_loop_and_status_ended_ones_too(store: Store) -> None:
    assert store.run_counts() == {}
    for n in range(1, 6):
        store.put_run(make_run(f"demo-run-{n}", created_at=T0 + timedelta(minutes=n)))
    store.put_run(make_run("other-run-1", loop="other", status="waiting"))
    store.put_run(make_run("other-run-2", loop="other", status="failed"))
    for n in (1, 2, 3):
        store.update_run(f"demo-run-{n}", lambda r: setattr(r, "status", "completed"))
    store.update_run("demo-run-4", lambda r: setattr(r, "status", "failed"))
    assert store.run_counts() == {("demo", "completed"): 3, ("demo", "failed"): 1, ("demo", "running"): 1,
                                  ("other", "waiting"): 1, ("other", "failed"): 1}
    assert store.counts()["runs"] == {"running": 1, "waiting": 1}  # the hot set only, as before


def test_recent_runs_orders_runs_created_at_the_same_instant(store: Store) -> None:
    for n in (9, 10, 11):
        store.put_run(make_run(f"demo-run-{n}", status="failed"))
    assert ids(store.recent_runs(2)) == ["demo-run-10", "demo-run-11"]


# -- outbox --------------------------------------------------------------------


def test_outbox_tasks_are_idempotent_due_in_order_and_finished(store: Store) -> None:
    assert store.add_task(make_task("b.post", created_at=T0 + H))
    assert store.add_task(make_task("a.post", created_at=T0 + H))
    assert store.add_task(make_task("c.post", created_at=T0, not_before=T0 + 3 * H))
    assert store.add_task(make_task("d.answer", channel="github", review_id="demo-2", created_at=T0))
    assert not store.add_task(make_task("a.post", payload={"other": True}))
    assert [t.payload for t in store.pending_tasks() if t.id == "a.post"] == [make_task().payload]
    assert ids(store.due_tasks("slack", T0 + 2 * H)) == ["a.post", "b.post"]
    assert ids(store.due_tasks("slack", T0 + 3 * H)) == ["c.post", "a.post", "b.post"]
    assert ids(store.due_tasks("slack", T0 + 3 * H, limit=1)) == ["c.post"]
    assert store.due_tasks("slack", T0) == [] and store.due_tasks("local", T0 + 9 * H) == []
    assert store.next_task_at("slack") == T0 + H and store.next_task_at("github") == T0
    assert store.next_task_at("local") is None
    assert ids(store.pending_tasks()) == ["c.post", "d.answer", "a.post", "b.post"]
    assert ids(store.pending_tasks("demo-2")) == ["d.answer"]

    def failed(task: OutboxTask) -> int:
        task.attempts += 1
        task.not_before, task.last_error = T0 + 5 * H, "HTTP 503"
        return task.attempts

    assert store.update_task("a.post", failed) == 1
    assert ids(store.due_tasks("slack", T0 + 4 * H)) == ["c.post", "b.post"]
    assert [t.last_error for t in store.pending_tasks() if t.id == "a.post"] == ["HTTP 503"]
    assert store.counts()["outbox_pending"] == 4
    assert store.outbox_backlog() == {"slack": 3, "github": 1}
    store.finish_tasks(["a.post"])
    store.finish_tasks(["a.post"])
    assert store.outbox_backlog() == {"slack": 2, "github": 1}
    assert "a.post" not in ids(store.pending_tasks())
    with pytest.raises(UnknownTaskError):
        store.update_task("a.post", failed)
    assert store.add_task(make_task("a.post"))  # a finished task's id may be used again


def test_task_ids_are_checked_and_round_trip(store: Store) -> None:
    with pytest.raises(StoreError):
        make_task("../evil")
    with pytest.raises(StoreError):
        make_task("a b")
    task = make_task("demo-1.post.slack:C0123", not_before=T0 + H, attempts=2, last_error="x")
    assert OutboxTask.from_dict(task.to_dict()) == task and task.to_dict()["format"] == 1
    store.add_task(task)
    assert store.pending_tasks() == [task]


# -- deliveries, problems, states ---------------------------------------------


def test_record_delivery_is_true_once_and_survives_reopening(store: Store, impl: Impl, tmp_path: Path) -> None:
    long_key = "slack:" + "é/..\\" * 40
    assert recorded(store, "gh-1") and recorded(store, long_key)
    assert not recorded(store, "gh-1") and not recorded(store, long_key)
    reopened = impl.open(tmp_path / "state")
    assert not recorded(reopened, "gh-1") and recorded(reopened, "gh-2")


def test_a_delivery_recorded_with_work_waits_until_finished_and_stays_known(
    store: Store, impl: Impl, tmp_path: Path
) -> None:
    work = [{"voter": {"channel": "github", "id": "alice"}, "command": {"verb": "approve"}, "note": "ü\u0000"}]
    assert recorded(store, "hook:d-1", work) and recorded(store, "hook:d-2", [])
    assert recorded(store, "plain")  # no work: known, never pending
    assert not recorded(store, "hook:d-1", work) and not recorded(store, "hook:d-1")
    reopened = impl.open(tmp_path / "state")  # a crash before the votes were cast loses none of them
    assert sorted(reopened.pending_deliveries()) == [("hook:d-1", work), ("hook:d-2", [])]
    reopened.finish_deliveries(["hook:d-1"])
    reopened.finish_deliveries(["hook:d-1", "plain"])  # twice, and a key without work: harmless
    assert reopened.pending_deliveries() == [("hook:d-2", [])]
    assert not recorded(reopened, "hook:d-1", work), "finished, and still a redelivery"
    assert not recorded(impl.open(tmp_path / "state"), "hook:d-1")


def test_deliveries_recorded_together_are_each_new_once_and_all_or_none_are_kept(store: Store) -> None:
    assert recorded(store, "hook:d-0")
    batch = [("hook:d-1", [{"n": 1}]), ("hook:d-0", [{"n": 0}]), ("hook:d-1", [{"n": 1}]), ("plain", None)]
    assert store.record_deliveries(batch) == [True, False, False, True]  # a key twice in one batch: new once
    assert store.pending_deliveries() == [("hook:d-1", [{"n": 1}])]
    with pytest.raises(TypeError):  # d-4's row cannot be written (its digest sorts last): d-2 and d-3 go with it
        store.record_deliveries([("hook:d-2", [{"n": 2}]), ("hook:d-3", [{"n": 3}]), ("hook:d-4", [{"x": object()}])])
    assert store.record_deliveries([("hook:d-2", None), ("hook:d-3", None), ("hook:d-4", None)]) == [True] * 3


def test_finishing_deliveries_queues_their_answers_in_the_same_write(store: Store) -> None:
    for n in range(3):
        assert recorded(store, f"hook:d-{n}", [{"n": n}])
    answers = [make_task(f"answer.github.{n}", channel="github", action="answer") for n in range(3)]
    store.finish_deliveries(["hook:d-0", "hook:d-1", "hook:d-2"], answers)
    assert store.pending_deliveries() == []
    assert sorted(task.id for task in store.pending_tasks()) == ["answer.github.0", "answer.github.1",
                                                                 "answer.github.2"]
    store.finish_deliveries(["hook:d-0"], answers[:1])  # a retry after a crash: each answer once
    assert len(store.pending_tasks()) == 3


def test_open_reviews_posted_at_find_where_an_answer_without_an_id_belongs(store: Store) -> None:
    def posted(review_id: str, minutes: int, *posts: tuple[str, dict[str, object]]) -> None:
        made = review(review_id, minutes=minutes)
        made.posts = [{"channel": channel, "data": data, "target": channel} for channel, data in posts]
        store.put_review(made)

    thread = {"channel": "C1", "ts": "2.0", "thread_ts": "1.0"}
    posted("demo-1", 1, ("slack", thread), ("github", {"repository": "octo/ops", "issue": 42, "comment_id": 7}))
    posted("demo-2", 2, ("github", {"repository": "octo/ops", "issue": 42, "comment_id": 9}))
    posted("demo-3", 3, ("slack", {"channel": "C1", "ts": "3.0", "thread_ts": "9.0"}))
    posted("demo-4", 4, ("slack", {"channel": "C1", "ts": "4.0"}), ("slack", {"thread_ts": "1.0"}))  # no one post
    posted("demo-5", 5, ("github", {"repository": "octo/ops", "issue": 42}))
    store.update_review("demo-5", approve)  # decided: no longer where answers go
    assert ids(store.open_reviews_posted_at("slack", {"channel": "C1", "thread_ts": "1.0"})) == ["demo-1"]
    assert ids(store.open_reviews_posted_at("github", {"repository": "octo/ops", "issue": 42})) == [
        "demo-1", "demo-2"]
    assert store.open_reviews_posted_at("github", {"repository": "octo/ops", "issue": "42"}) == []  # not 42
    assert store.open_reviews_posted_at("slack", {"repository": "octo/ops", "issue": 42}) == []  # other channel
    assert store.open_reviews_posted_at("github", {"repository": "octo/other", "issue": 42}) == []


def test_a_review_found_where_it_was_posted_comes_without_its_votes_history_or_keys(store: Store) -> None:
    """The vote path finds the review an answer without an id belongs to on every GitHub comment; reading its
    whole audit trail, or every voter's current vote, each time made the 5,000th answer slower than the 10th
    (casting reads what it needs)."""
    made = make_review("demo-1", required=99)
    made.posts = [{"channel": "github", "data": {"repository": "octo/ops", "issue": 42}, "target": "github"}]
    store.put_review(made)
    votes = [(Vote(f"local:v{n}", HumanDecision.APPROVE, at=T0, delivery_key=f"k{n}"), None) for n in range(30)]
    store.cast_votes({"demo-1": votes})
    (found,) = store.open_reviews_posted_at("github", {"repository": "octo/ops", "issue": 42})
    assert found.id == "demo-1" and found.votes == [] and found.posts == made.posts  # who may answer, where
    assert list(found.history) == [] and found.delivery_keys == []
    assert store.get_review("demo-1", history=False, votes=False).to_dict() == found.to_dict()
    assert len(store.get_review("demo-1", history=False).votes) == 30
    whole = store.get_review("demo-1")
    assert len(whole.votes) == len(whole.history) == len(whole.delivery_keys) == 30


def test_open_reviews_and_a_listing_without_history_read_the_current_votes_only(store: Store, impl: Impl) -> None:
    """The dashboard, /metrics, Slack's status, the GitHub poller (``open_reviews``) and ``loopbot status``
    (``list_reviews(history=False, request=False)``) use the current votes and the policy: their cost must not grow
    with every vote ever cast on thousands of reviews, nor (on SQLite) with the proposals."""
    made = make_review("demo-1", required=99)
    made.request = {"proposal": {"sections": [{"kind": "table", "rows": [["#1", "x" * 100]] * 500}]}}
    store.put_review(made)
    votes = [(Vote(f"local:v{n % 3}", HumanDecision.APPROVE, at=T0, delivery_key=f"k{n}"), None) for n in range(30)]
    store.cast_votes({"demo-1": votes})
    for found in (*store.open_reviews(), *store.open_reviews(limit=1), *store.list_reviews(history=False)):
        assert found.id == "demo-1" and len(found.votes) == 3 and len(found.approvals) == 3
        assert list(found.history) == [] and found.delivery_keys == []
    (light,) = store.list_reviews(history=False, request=False)
    assert light.request == ({} if impl.name == "sqlite" else made.request) and len(light.votes) == 3
    (whole,) = store.list_reviews()
    assert len(whole.history) == 30 and len(whole.delivery_keys) == 30 and whole.request == made.request


def test_a_healthy_store_has_no_problems(store: Store) -> None:
    store.put_review(review("demo-1"))
    assert store.problems() == []


def big_state(steps: int) -> LoopState:
    now = datetime(2026, 1, 1, 12, 0, 0)
    plan = Plan(id="p", goal="g", steps=[Step(id=f"s{i}", description=f"d{i}") for i in range(steps)], created_at=now)
    return LoopState(status=LoopStatus.RUNNING, current_iteration=2, current_plan=plan, started_at=now, updated_at=now)


def test_states_round_trip_and_the_dict_api_reads_them(store: Store) -> None:
    assert store.load_state("demo-run-1") is None
    state = big_state(3)
    store.save_state("demo-run-1", state)
    loaded = store.load_state("demo-run-1")
    assert loaded is not None and loaded.current_plan is not None
    assert [s.id for s in loaded.current_plan.steps] == ["s0", "s1", "s2"] and loaded.current_iteration == 2
    snapshot = store.load_snapshot("demo-run-1")
    assert snapshot is not None and snapshot["current_iteration"] == 2
    document = {"format": 1, "run_id": "demo-run-2", "snapshot": snapshot}  # the directory store's, imported
    store.put_snapshot_bytes("demo-run-2", orjson.dumps(document))  # type: ignore[attr-defined]
    again = store.load_state("demo-run-2")
    assert again is not None and again.current_iteration == 2


@pytest.mark.parametrize("engine, refused, why", [
    ({"schema_version": 2, "state": {}}, NewerFormatError, "schema_version 2"),
    ({"schema_version": "1", "state": {}}, CorruptDocumentError, "not a positive integer"),
    ({"schema_version": 1}, CorruptDocumentError, "not a loop state document"),
])
def test_a_snapshot_is_checked_by_the_engines_own_rule_and_named_by_its_row(
    store: Store, tmp_path: Path, engine: dict[str, object], refused: type[Exception], why: str
) -> None:
    """The engine's loader and the store refuse the same documents for the same reason (one check, the engine's),
    each naming where the document is kept."""
    from loop_engine.persistence import LoopStatePersistence, PersistenceConfig

    path = tmp_path / "engine" / "loop_state_t.json"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(engine))
    with pytest.raises(ValueError, match=why):
        LoopStatePersistence(PersistenceConfig(state_dir=path.parent, format="json")).load_path(path)
    store.put_snapshot_bytes("demo-run-1", orjson.dumps({"format": 2, "run_id": "demo-run-1", "engine": engine}))
    with pytest.raises(refused, match=f"snapshots/demo-run-1.*{why}"):
        store.load_state("demo-run-1")


def test_a_review_request_with_a_5000_row_proposal_round_trips_through_the_store(store: Store) -> None:
    """Issue 18.1: the proposal travels in the snapshot and in the review record, equal, on every store."""
    rows = [[f"#{n}", f"title {n} | ü\nsecond line", "P1, stale", '"crash" in the title'] for n in range(5_000)]
    proposal = Proposal("Approve to apply 5000 label changes to octo/ops",
                        [Table(["Issue", "Title", "Labels to add", "Why"], rows, title="Proposed changes"),
                         ChangeList(["approve applies every change above"])])
    request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, {"iteration": 1},
                            "Continue", {"reason": "apply"}, timestamp=T0, cause="external:x", proposal=proposal)
    state = big_state(2)
    state.pending_review = request
    store.save_state("demo-run-1", state)
    loaded = store.load_state("demo-run-1")
    assert loaded == state and loaded is not None and loaded.pending_review is not None
    assert loaded.pending_review.proposal == proposal
    record = make_review("demo-1")
    record.request = request.to_dict()
    store.put_review(record)
    again = store.get_review("demo-1")
    assert again == record and ReviewRequest.from_dict(again.request) == request
