"""Migrations on databases older versions wrote: schema 6 (delivery keys and any history left in a document move
to rows) on one schema 5 wrote, schema 7 (the outbox's attempts as an indexed column) on one schema 6 wrote,
schema 8 (each person's current vote moves from the document to a row) on one schema 7 wrote."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.review_records import Reviewers, Vote
from bot.reviews import VoteResult
from bot.store import CorruptDocumentError, Store
from bot.store.sql_schema import SCHEMA_VERSION
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import IMPLS, T0, Impl, make_review, make_task


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


def approve(voter: str, key: str, minute: int) -> Vote:
    return Vote(voter, HumanDecision.APPROVE, at=T0 + timedelta(minutes=minute), delivery_key=key)


def _outbox_as_schema_6(cur: Any) -> None:
    """The outbox as schema 6 kept it: a task's attempts only in its document."""
    cur.execute("DROP INDEX outbox_failing")
    cur.execute("ALTER TABLE outbox DROP COLUMN attempts")


def _votes_as_schema_7(store: Store, cur: Any) -> None:
    """Each review's current votes back inside its document, as schema 7 kept them, and no ``review_ballots``."""
    votes = {r.id: [v.to_dict() for v in r.votes] for r in store.list_reviews(archived=True, history=False)}
    for key, text in cur.execute("SELECT key, doc FROM reviews").fetchall():
        cur.execute("UPDATE reviews SET doc = %s WHERE key = %s", (json.dumps({**json.loads(text),
                                                                               "votes": votes[key]}), key))
    cur.execute("DROP TABLE review_ballots")


def _as_schema_5(store: Store) -> dict[str, list[dict[str, object]]]:
    """Rewrite the store's tables as schema 5 kept them: votes and keys in each document (keys in the order
    cast), no ``review_keys``; demo-2's history inside its document, as one stored before schema 4 kept it. The
    histories it had, by review."""
    histories = {r.id: [v.to_dict() for v in r.history] for r in store.list_reviews()}
    with store.engine.write() as cur:  # type: ignore[attr-defined]
        _votes_as_schema_7(store, cur)
        for key, text in cur.execute("SELECT key, doc FROM reviews").fetchall():
            document = json.loads(text)
            document["delivery_keys"] = [v["delivery_key"] for v in histories[document["id"]]]
            if key == "demo-2":
                document["history"] = histories["demo-2"]
                cur.execute("DELETE FROM review_votes WHERE review_key = %s", (key,))
            cur.execute("UPDATE reviews SET doc = %s WHERE key = %s", (json.dumps(document), key))
        cur.execute("DROP TABLE review_keys")
        _outbox_as_schema_6(cur)
        cur.execute("UPDATE loopbot_schema SET version = 5")
    return histories


def test_a_schema_5_database_keeps_every_vote_and_dedupe_key_on_both_engines(impl: Impl, tmp_path: Path) -> None:
    old = impl.open(tmp_path / "state")
    for n in (1, 2):
        review = make_review(f"demo-{n}", required=9)
        review.policy.reviewers = Reviewers(local=["a", "b", "c"])
        old.put_review(review)
        old.cast_votes({f"demo-{n}": [(approve(f"local:{v}", f"{n}-k{m}", m), None)
                                      for m, v in enumerate("cab" * 4)]})  # keys not in sorted order
    histories = _as_schema_5(old)
    old.close()  # type: ignore[attr-defined]

    store = impl.open(tmp_path / "state")  # migrated on open
    with store.engine.read() as cur:  # type: ignore[attr-defined]
        assert cur.execute("SELECT version FROM loopbot_schema").fetchone()[0] == SCHEMA_VERSION
        docs = [json.loads(doc) for (doc,) in cur.execute("SELECT doc FROM reviews").fetchall()]
    assert all("delivery_keys" not in doc and "history" not in doc and "votes" not in doc for doc in docs)
    for n in (1, 2):
        review = store.get_review(f"demo-{n}")
        assert [v.to_dict() for v in review.history] == histories[f"demo-{n}"]
        assert review.delivery_keys == sorted(f"{n}-k{m}" for m in range(12))
        results = store.cast_votes({f"demo-{n}": [(approve("local:a", f"{n}-k10", 50), None),
                                                  (approve("local:a", f"{n}-new", 51), None)]})[f"demo-{n}"]
        assert [r.kind for r in results] == ["duplicate", "counted"]  # type: ignore[union-attr]
        assert [v.delivery_key for v in store.get_review(f"demo-{n}").history] == [
            *(f"{n}-k{m}" for m in range(12)), f"{n}-new"]  # appended after the migrated trail


def test_a_schema_6_outbox_keeps_its_failing_tasks_found_by_the_index_on_both_engines(impl: Impl, tmp_path: Path
                                                                                        ) -> None:
    old = impl.open(tmp_path / "state")
    for n in range(6):
        old.add_task(make_task(f"demo-{n}.post.slack-C1", created_at=T0 + timedelta(minutes=n), attempts=n % 3))
    with old.engine.write() as cur:  # type: ignore[attr-defined]
        _votes_as_schema_7(old, cur)
        _outbox_as_schema_6(cur)
        cur.execute("UPDATE loopbot_schema SET version = 6")
    old.close()  # type: ignore[attr-defined]

    store = impl.open(tmp_path / "state")  # migrated on open
    failing = [f"demo-{n}.post.slack-C1" for n in (1, 2, 4, 5)]
    tasks, total = store.failing_tasks(3)
    assert [t.id for t in tasks] == failing[:3] and total == 4 and [t.attempts for t in tasks] == [1, 2, 1]
    store.update_task("demo-0.post.slack-C1", lambda t: setattr(t, "attempts", 1))
    store.update_task("demo-5.post.slack-C1", lambda t: setattr(t, "attempts", 0))
    assert [t.id for t in store.failing_tasks(10)[0]] == ["demo-0.post.slack-C1", *failing[:3]]
    with store.engine.read() as cur:  # type: ignore[attr-defined]
        assert cur.execute("SELECT version FROM loopbot_schema").fetchone()[0] == SCHEMA_VERSION


def _counted(results: list[VoteResult] | Exception) -> list[str]:
    assert not isinstance(results, Exception), results
    return [r.message for r in results]


def test_a_schema_7_database_keeps_each_persons_current_vote_in_order_on_both_engines(impl: Impl, tmp_path: Path
                                                                                       ) -> None:
    old = impl.open(tmp_path / "state")
    for n in (1, 2, 3):
        review = make_review(f"demo-{n}", required=9)
        review.policy.reviewers = Reviewers(local=["a", "b", "c", "d"])
        old.put_review(review)
    pause = Vote("local:c", HumanDecision.PAUSE, "2h", at=T0)
    modify = Vote("local:d", HumanDecision.MODIFY, modifications={"context": {"n": 1}}, at=T0, person="Dee")
    old.cast_votes({"demo-1": [(approve("local:a", "k0", 0), None), (approve("local:b", "k1", 1), None),
                               (pause, None), (modify, None), (approve("local:a", "k2", 2), None)]})
    expected = {r.id: [v.to_dict() for v in r.votes] for r in old.list_reviews()}
    assert [v["voter"] for v in expected["demo-1"]] == ["local:b", "local:c", "local:d", "local:a"]  # latest last
    with old.engine.write() as cur:  # type: ignore[attr-defined]
        _votes_as_schema_7(old, cur)
        cur.execute("UPDATE reviews SET doc = %s WHERE key = 'demo-3'",  # its votes are not all readable
                    (json.dumps({**json.loads(cur.execute("SELECT doc FROM reviews WHERE key = 'demo-3'"
                                                          ).fetchone()[0]), "votes": [{"voter": "local:a"}]}),))
        cur.execute("UPDATE loopbot_schema SET version = 7")
    old.close()  # type: ignore[attr-defined]

    store = impl.open(tmp_path / "state")  # migrated on open
    with store.engine.read() as cur:  # type: ignore[attr-defined]
        assert cur.execute("SELECT version FROM loopbot_schema").fetchone()[0] == SCHEMA_VERSION == 8
        docs = {key: json.loads(doc) for key, doc in cur.execute("SELECT key, doc FROM reviews").fetchall()}
        assert cur.execute("SELECT count(*) FROM review_ballots").fetchone()[0] == 4
    assert "votes" not in docs["demo-1"] and "votes" not in docs["demo-2"]
    for review in (store.get_review("demo-1"), *store.open_reviews()[:1], store.list_reviews(history=False)[0]):
        assert [v.to_dict() for v in review.votes] == expected["demo-1"]
    assert store.get_review("demo-2").votes == []
    with pytest.raises(CorruptDocumentError, match="demo-3"):  # kept in its document, named when read
        store.get_review("demo-3")
    again = [(approve("local:b", "k3", 3), None), (Vote("local:c", HumanDecision.APPROVE, at=T0), None),
             (Vote("slack:U1", HumanDecision.MODIFY, modifications={"context": {"n": 1}}, at=T0, person="dee"), None)]
    assert _counted(store.cast_votes({"demo-1": again})["demo-1"]) == [
        "approve from local:b recorded: 2 of 9 needed",  # b's migrated approval is replaced, not counted twice
        "approve from local:c recorded: 3 of 9 needed; replaces your earlier pause",
        'modify from slack:U1 recorded: 1 of 9 needed for these changes: {"context": {"n": 1}}']  # Dee's own
    assert [v.voter for v in store.get_review("demo-1").votes] == ["local:a", "local:b", "local:c", "slack:U1"]
