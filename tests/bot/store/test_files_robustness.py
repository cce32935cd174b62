"""Issue 12, the store's part: one bad file must not stop the bot, take votes, or reuse an id.

Each test failed before: a review file whose id is not its name took the
other review's votes and showed twice; a request with a bad id blocked the
inbox; a damaged counter raised on every decision; one unreadable review
made every ``list_reviews`` raise.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from bot.reviews import Vote, cast_vote
from bot.store import CorruptDocumentError, FileStore, NewerFormatError
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import T0, make_review, make_run


def vote(voter: str) -> Vote:
    return Vote(f"local:{voter}", HumanDecision.APPROVE)


# -- 12.4: a document is checked against the name it was read under -------------------


def test_a_review_file_holding_another_id_takes_no_votes_and_does_not_show_twice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStore(tmp_path)
    store.put_review(make_review("demo-1", required=2))
    reviews = tmp_path / "reviews"
    (reviews / "demo-2.json").write_bytes((reviews / "demo-1.json").read_bytes())  # a copy under another name
    with pytest.raises(CorruptDocumentError, match="demo-2.json: holds id 'demo-1'"):
        store.update_review("demo-2", lambda r: cast_vote(r, vote("a"), now=T0))
    assert store.get_review("demo-1").votes == []
    assert [r.id for r in store.list_reviews()] == ["demo-1"]
    assert [r.id for r in store.open_reviews()] == ["demo-1"] and store.counts()["open_reviews"] == 1
    (problem,) = store.problems()
    assert problem.startswith("reviews/demo-2.json: ") and "holds id 'demo-1'" in problem
    assert not (reviews / "demo-2.json").exists()
    assert len([r for r in caplog.records if "demo-2.json" in r.getMessage()]) == 1


def test_a_run_file_holding_another_id_is_set_aside(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    store.put_run(make_run("demo-run-1"))
    runs = tmp_path / "runs"
    (runs / "demo-run-2.json").write_bytes((runs / "demo-run-1.json").read_bytes())
    assert [r.id for r in store.list_runs()] == ["demo-run-1"]
    assert [p.split(":")[0] for p in store.problems()] == ["runs/demo-run-2.json"]


# -- 12.5: requests are identified by their file name -----------------------------------


def test_a_request_with_a_bad_id_is_taken_by_its_file_name_and_can_be_finished(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    ids = [store.enqueue_request("run", {"loop": n}) for n in ("a", "b", "c")]
    path = tmp_path / "inbox" / f"{ids[2]}.json"
    document = json.loads(path.read_text())
    document["id"] = "../../evil"
    path.write_text(json.dumps(document))
    taken = store.take_requests()
    assert [r.id for r in taken] == ids and taken[2].payload == {"loop": "c"}
    for request in taken:
        store.finish_request(request.id)
    later = store.enqueue_request("run", {"loop": "d"})
    (tmp_path / "inbox" / "Not A Request.json").write_text(json.dumps(document))  # a name finish_request refuses
    assert [r.id for r in store.take_requests()] == [later]
    assert (tmp_path / "inbox" / "Not A Request.json.corrupt").exists()


# -- 12.7: a damaged counter does not consume a decision or reuse an id --------------------


@pytest.mark.parametrize("content", ['{"format": 1, "prefix": "demo", "la', "", '{"format": 1, "last": "7"}'])
def test_a_damaged_counter_resumes_past_every_id_in_use(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStore(tmp_path)
    for _ in range(3):
        store.put_review(make_review(store.next_id("demo")))
    store.put_review(make_review("demo-9"))  # e.g. made by hand, or the counter went backwards
    store.update_review("demo-9", lambda r: setattr(r, "status", "applied"))  # archived ids count too
    counter = tmp_path / "counters" / "demo.json"
    counter.write_text(content)
    with caplog.at_level(logging.ERROR):
        assert store.next_id("demo") == "demo-10"
    assert store.next_id("demo") == "demo-11"
    assert (tmp_path / "counters" / "demo.json.corrupt").read_text() == content
    assert "demo.json" in caplog.text and "demo-9" in caplog.text


# -- 12.8: one bad document is set aside, the rest are served -----------------------------


def test_bad_review_documents_are_quarantined_once_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStore(tmp_path)
    store.put_review(make_review("demo-1"))
    reviews = tmp_path / "reviews"
    good = json.loads((reviews / "demo-1.json").read_text())
    (reviews / "demo-2.json").write_text('{"format": 1, "id": "demo-2", "lo')  # truncated
    (reviews / "demo-3.json").write_text("")  # empty
    (reviews / "demo-4.json").write_bytes(b"\xff\xfe garbage")
    (reviews / "demo-5.json").write_text(json.dumps({**good, "id": "demo-5", "format": 99}))  # newer format
    (reviews / "notes.json").write_text('{"todo": "ask alice"}')  # a stray file
    with caplog.at_level(logging.ERROR):
        assert [r.id for r in store.open_reviews()] == ["demo-1"]
        assert [r.id for r in store.list_reviews()] == ["demo-1"]
        store.update_review("demo-1", lambda r: cast_vote(r, vote("a"), now=T0))
        assert [r.id for r in store.decided_reviews()] == ["demo-1"]
    problems = store.problems()
    assert [p.split(":")[0] for p in problems] == [f"reviews/demo-{n}.json" for n in (2, 3, 4, 5)] + [
        "reviews/notes.json"
    ]
    assert "newer format" in problems[3] and "version 99" in problems[3]
    for name in ("demo-2.json", "demo-3.json", "demo-4.json", "demo-5.json", "notes.json"):
        assert len([r for r in caplog.records if f"reviews/{name}" in r.getMessage()]) == 1, name
        assert (tmp_path / "quarantine" / "reviews" / name).exists()
    with pytest.raises(NewerFormatError, match="version 99"):
        store.get_review("demo-5")
    assert FileStore(tmp_path).problems() == problems  # kept across restarts


def test_a_bad_outbox_task_does_not_block_the_others(tmp_path: Path) -> None:
    from .test_store_contract import make_task

    store = FileStore(tmp_path)
    store.add_task(make_task("a.post"))
    (tmp_path / "outbox" / "b.post.json").write_text("{")
    assert [t.id for t in store.due_tasks("slack", T0)] == ["a.post"]
    assert [p.split(":")[0] for p in store.problems()] == ["outbox/b.post.json"]


def test_putting_a_document_replaces_a_damaged_or_quarantined_one(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "demo-run-1.json").write_text("{")
    store.put_run(make_run("demo-run-1"))
    assert store.get_run("demo-run-1").status == "running"
    (tmp_path / "runs" / "demo-run-2.json").write_text("{")
    assert [r.id for r in store.list_runs()] == ["demo-run-1"]  # demo-run-2 quarantined
    store.put_run(make_run("demo-run-2"))
    assert [r.id for r in store.list_runs()] == ["demo-run-1", "demo-run-2"]


def test_a_planted_lock_link_creates_nothing_outside_the_state_dir(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "runs").mkdir(parents=True)
    outside = tmp_path / "outside.lock"
    (state / "runs" / ".lock").symlink_to(outside)
    store = FileStore(state)
    with pytest.raises(OSError):
        store.put_run(make_run())
    assert not outside.exists()
