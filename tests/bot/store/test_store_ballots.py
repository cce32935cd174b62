"""A cast reads only what its votes need (``review_ballots``): the same answers and the same review as casting
each vote on a review holding everything, and work that does not grow with the people who voted before.

Parametrised over the same engines as test_store_contract.py.
"""

from __future__ import annotations

import copy
import itertools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bot.review_records import Vote
from bot.reviews import VoteResult
from bot.store import Store
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import IMPLS, T0, Impl, make_review
from .test_store_votes import _one_by_one

#: (account, person): slack:U1 is local:a's other account, github:dee and local:d are one person too.
ACCOUNTS = [("local:a", "ann"), ("slack:U1", "Ann"), ("local:b", None), ("local:c", None), ("local:d", "DEE"),
            ("github:dee", "dee")]
CHANGES: list[dict[str, Any]] = [{"context": {"n": 1}}, {"context": {"n": 1.0}}, {"context": {"n": True}},
                                 {"context": {"x": "y"}}, {}]
#: Weighted towards decisions that need several people: a reject (with a reason) ends the example.
DECISIONS = [HumanDecision.APPROVE, HumanDecision.APPROVE, HumanDecision.RETRY, HumanDecision.MODIFY,
             HumanDecision.MODIFY, HumanDecision.MODIFY, HumanDecision.PAUSE, HumanDecision.REJECT]


@pytest.fixture(scope="module", params=IMPLS, ids=lambda i: i.name)
def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One store for every example of an engine: each example casts on a review of its own."""
    return request.param.open(tmp_path_factory.mktemp("ballots") / "state")


@st.composite
def votes(draw: st.DrawFn) -> tuple[Vote, str | None]:
    account, person = draw(st.sampled_from(ACCOUNTS))
    decision = draw(st.sampled_from(DECISIONS))
    changes = draw(st.sampled_from(CHANGES)) if decision is HumanDecision.MODIFY else {}
    feedback = draw(st.sampled_from(["", "ok", "2h"] if decision is HumanDecision.PAUSE else ["", "ok", "wrong"]))
    key = draw(st.one_of(st.none(), st.sampled_from([f"k{n}" for n in range(6)])))  # redeliveries
    refusal = draw(st.sampled_from([None, None, None, f"vote refused: {account} is not a reviewer"]))
    vote = Vote(account, decision, feedback, dict(changes), source=account.split(":")[0], delivery_key=key,
                person=person)
    return vote, refusal


_reviews = itertools.count(1)


def _vote(account: str, decision: HumanDecision, feedback: str = "", changes: dict[str, Any] | None = None,
          person: str | None = None) -> tuple[Vote, None]:
    return Vote(account, decision, feedback, changes or {}, person=person), None


M = HumanDecision.MODIFY


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@example(required=3, cuts={1, 2, 3, 4}, prior=0, drawn=[  # rivals and replaced votes cast in earlier batches
    _vote("local:b", M, "ok", CHANGES[0]), _vote("local:c", M, "", CHANGES[1]), _vote("local:a", HumanDecision.APPROVE),
    _vote("slack:U1", M, "same", CHANGES[0], "Ann"), _vote("local:d", M, "", CHANGES[0], "DEE")])
@example(required=2, cuts={2, 3}, prior=1, drawn=[  # an outcome completed by a batch: its voters and notes
    _vote("local:b", HumanDecision.APPROVE, "ok"), _vote("local:c", HumanDecision.RETRY),
    _vote("local:d", HumanDecision.PAUSE, "2h"), _vote("local:c", HumanDecision.APPROVE, "fine")])
@given(required=st.integers(1, 4), drawn=st.lists(votes(), min_size=1, max_size=14),
       cuts=st.sets(st.integers(1, 13), max_size=13), prior=st.integers(0, 2))
def test_batches_answer_and_store_what_casting_one_by_one_on_the_whole_review_does(
    shared: Store, required: int, drawn: list[tuple[Vote, str | None]], cuts: set[int], prior: int
) -> None:
    review_id = f"demo-{next(_reviews)}"
    reference = make_review(review_id, required=required)
    shared.put_review(copy.deepcopy(reference))
    casts = [(replace(vote, at=T0 + timedelta(minutes=n)), why) for n, (vote, why) in enumerate(drawn)]
    # the first ``prior`` votes were cast through update_review (a whole review written), the rest in batches
    answered: list[VoteResult] = []
    for cast in casts[:prior]:
        answered += shared.update_review(review_id, lambda r, c=cast: _one_by_one(r, [c]))  # type: ignore[misc]
    expected = _one_by_one(reference, casts)
    bounds = [prior, *sorted(cut for cut in cuts if prior < cut < len(casts)), len(casts)]
    for start, end in itertools.pairwise(bounds):
        results = shared.cast_votes({review_id: casts[start:end]})[review_id]
        assert not isinstance(results, Exception), results
        answered += results
    assert answered == expected  # messages, kinds, outcomes
    assert shared.get_review(review_id).to_dict() == reference.to_dict()  # votes in order, history, keys, outcome


# -- the work of a cast ----------------------------------------------------------------------------------------


@dataclass
class Work:
    """What a call does, seen by ``sys.setprofile``: statements run, rows and bytes fetched, votes decoded."""

    statements: int = 0
    rows: int = 0
    bytes: int = 0
    decoded: dict[str, int] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)  # the tables written to
    round_trips: int = 0  # in a pipelined PostgreSQL write: the times psycopg sent what it queued and awaited answers

    def watch(self, frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        cursor = code.co_filename.endswith(("bot/store/engines.py", "psycopg/cursor.py"))
        if event == "call" and cursor and code.co_name == "execute":
            self.statements += 1
            words = str(frame.f_locals.get("statement", "")).split()
            if words[:1] in (["INSERT"], ["DELETE"], ["UPDATE"]):
                self.written.add(words[1 if words[0] == "UPDATE" else 2])
        elif event == "call" and code.co_name == "wait" and code.co_filename.endswith("psycopg/connection.py"):
            exchange = getattr(frame.f_locals.get("gen"), "__name__", "")
            self.round_trips += exchange in ("_fetch_gen", "_exit_gen", "_sync_gen")  # sent, and answers awaited
        elif event == "return" and cursor and code.co_name in ("fetchone", "fetchall") and arg is not None:
            for row in arg if code.co_name == "fetchall" else [arg]:
                self.rows += 1
                self.bytes += sum(len(str(value)) for value in row)
        elif event == "call" and code.co_qualname.endswith((".from_dict", ".to_dict")):
            self.decoded[code.co_qualname] = self.decoded.get(code.co_qualname, 0) + 1


def work_of(action: Callable[[], object]) -> Work:
    work = Work()
    sys.setprofile(work.watch)
    try:
        action()
    finally:
        sys.setprofile(None)
    return work


def _approvals(names: Iterator[str], n: int) -> list[tuple[Vote, None]]:
    return [(Vote(f"local:{next(names)}", HumanDecision.APPROVE, at=T0), None) for _ in range(n)]


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_a_casts_reads_and_decoding_do_not_grow_with_the_people_who_voted(impl: Impl, tmp_path: Path) -> None:
    store = impl.open(tmp_path / "state")
    names = (f"p{n:05d}" for n in itertools.count())
    for review_id, voters in (("demo-1", 10), ("demo-2", 2000)):
        store.put_review(make_review(review_id, required=10_000))
        for start in range(0, voters, 500):
            store.cast_votes({review_id: _approvals(names, min(500, voters - start))})
    seen = {}
    for review_id in ("demo-1", "demo-2"):
        again = store.get_review(review_id).votes[3]  # one voter's second vote: it replaces the first
        batch = [*_approvals(names, 20), (Vote(again.voter, HumanDecision.RETRY, at=T0), None)]
        cast = work_of(lambda: store.cast_votes({review_id: batch}))  # noqa: B023 - called at once
        prepare = work_of(lambda: store.get_review(review_id, history=False, votes=False))  # noqa: B023
        seen[review_id] = cast, prepare
    (few, few_prepare), (many, many_prepare) = seen["demo-1"], seen["demo-2"]
    assert few.decoded["Vote.from_dict"] == many.decoded["Vote.from_dict"] == 1  # the replaced vote, alone
    assert (many.statements, many.rows, many.decoded) == (few.statements, few.rows, few.decoded)
    assert many.bytes <= few.bytes * 1.05  # the same rows; seq numbers and ids are a few digits longer
    assert many_prepare == few_prepare and "Vote.from_dict" not in many_prepare.decoded
    assert len(store.get_review("demo-2").votes) == 2020  # every current vote is still there to read


@pytest.mark.parametrize("impl", IMPLS, ids=lambda i: i.name)
def test_a_cast_that_decides_nothing_leaves_the_reviews_row_as_it_was_and_one_that_decides_writes_it(
    impl: Impl, tmp_path: Path
) -> None:
    """A vote is rows of its own: the review's row (its document, a large one with its reviewers) is rewritten only
    when the cast changes it. On PostgreSQL the cast is two round trips: the locks with every read, then the writes
    with the commit (a batch that may decide reads the agreeing votes in between)."""
    store = impl.open(tmp_path / "state")
    names = (f"p{n:05d}" for n in itertools.count())
    store.put_review(make_review("demo-1", required=3))
    undecided = work_of(lambda: store.cast_votes({"demo-1": _approvals(names, 2)}))
    assert undecided.written == {"review_votes", "review_ballots"}
    deciding = work_of(lambda: store.cast_votes({"demo-1": _approvals(names, 1)}))
    assert deciding.written == {"reviews", "review_votes", "review_ballots"}
    review = store.get_review("demo-1")
    assert (review.status, len(review.votes), len(review.history)) == ("decided", 3, 3)
    if impl.name == "postgres":
        assert (undecided.round_trips, deciding.round_trips) == (2, 3)
