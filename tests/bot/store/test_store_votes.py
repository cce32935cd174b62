"""The Store contract, continued: batched votes, run claims, writers in other processes.

Parametrised over the same engines as test_store_contract.py.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import timedelta
from functools import partial
from pathlib import Path

import pytest

from bot.review_records import Review, Reviewers, Vote
from bot.reviews import VoteResult, cast_vote
from bot.store import Store, UnknownReviewError
from bot.store.base import NO_CLAIM
from loop_engine.checkpoint import HumanDecision

from .test_store_contract import recorded, IMPLS, ROOT, T0, Impl, make_review

VOTERS = [f"local:v{n}" for n in range(6)]


@pytest.fixture(params=IMPLS, ids=lambda i: i.name)
def impl(request: pytest.FixtureRequest) -> Impl:
    return request.param


@pytest.fixture
def store(impl: Impl, tmp_path: Path) -> Store:
    made = impl.open(tmp_path / "state")
    for n in (1, 2):
        review = make_review(f"demo-{n}", required=9, created_at=T0 + timedelta(minutes=n))
        review.policy.reviewers = Reviewers(local=[v.split(":")[1] for v in VOTERS[:-1]])
        made.put_review(review)
    return made


def approve(voter: str, key: str | None, minute: int = 0) -> Vote:
    return Vote(voter, HumanDecision.APPROVE, at=T0 + timedelta(minutes=minute), delivery_key=key)


def _one_by_one(review: Review, casts: list[tuple[Vote, str | None]]) -> list[VoteResult]:
    return [cast_vote(review, vote, now=vote.at, authorize_with=lambda _r, _v, why=why: why)  # type: ignore[misc]
            for vote, why in casts]


def test_a_batch_is_what_casting_each_vote_alone_does(store: Store, impl: Impl, tmp_path: Path) -> None:
    reference = impl.open(tmp_path / "reference")
    for review in store.list_reviews():
        reference.put_review(review)
    batch = {
        "demo-1": [(approve("local:v0", "k0"), None), (approve("local:v1", "k1", 1), None),
                   (approve("local:v0", "k0", 2), None), (approve("local:v5", "k5", 3), "local:v5 may not vote")],
        "demo-2": [(Vote("local:v2", HumanDecision.REJECT, "wrong labels", at=T0, delivery_key="k9"), None)],
    }
    results = store.cast_votes(batch)
    expected = {rid: reference.update_review(rid, partial(_one_by_one, casts=casts)) for rid, casts in batch.items()}
    assert results == expected
    assert [r.accepted for r in results["demo-1"]] == [True, True, False, False]  # a repeat, a refusal
    assert results["demo-2"][0].outcome is not None  # type: ignore[union-attr]
    again = impl.open(tmp_path / "state")  # what was answered is what is stored
    for review_id in batch:
        assert again.get_review(review_id).to_dict() == reference.get_review(review_id).to_dict()


def test_a_review_that_fails_fails_alone(store: Store, impl: Impl, tmp_path: Path) -> None:
    store.update_review("demo-2", lambda r: cast_vote(r, approve("local:v0", None), now=T0))
    broken = [(Vote("local:v1", HumanDecision.APPROVE, at=None), None)]  # the rules refuse a vote without a time
    results = store.cast_votes({"nope-1": [(approve("local:v0", "k0"), None)],
                                "demo-1": [(approve("local:v0", "k0"), None)],
                                "demo-2": broken})  # type: ignore[dict-item]
    assert list(results) == ["nope-1", "demo-1", "demo-2"]  # in the order asked
    assert isinstance(results["nope-1"], UnknownReviewError)
    assert isinstance(results["demo-2"], AssertionError)
    assert results["demo-1"][0].accepted  # type: ignore[index]
    again = impl.open(tmp_path / "state")
    assert [v.voter for v in again.get_review("demo-1").votes] == ["local:v0"]
    assert [v.voter for v in again.get_review("demo-2").history] == ["local:v0"]  # the failed batch left nothing


def test_claims(store: Store, impl: Impl) -> None:
    claim = store.claim_run("demo-run-1")
    assert claim is not None and claim.held()
    if impl.name == "sqlite":  # one serve per state dir (serve.lock): nothing to claim against
        assert claim is NO_CLAIM and store.claim_run("demo-run-1") is NO_CLAIM
    else:
        assert store.claim_run("demo-run-1") is None  # a second session is refused, even in this process
    claim.release()
    again = store.claim_run("demo-run-1")
    assert again is not None
    again.release()


DECIDER = """
import sys
from datetime import datetime, timedelta, timezone
from bot.review_records import Vote
from loop_engine.checkpoint import HumanDecision
{open_code}
tag, n = sys.argv[1], int(sys.argv[2])
at = datetime(2025, 1, 6, 9, 0, tzinfo=timezone.utc)
for i in range(n):
    vote = Vote(f"local:{{tag}}{{i}}", HumanDecision.APPROVE, at=at, delivery_key=f"{{tag}}-{{i}}")
    result = store.cast_votes({{"demo-1": [(vote, None)], "demo-2": [(vote, None)]}})
    assert all(r[0].accepted for r in result.values()), result
    print(vote.voter, flush=True)
"""


def test_batches_from_other_processes_while_this_one_writes_lose_nothing(
    store: Store, impl: Impl, tmp_path: Path
) -> None:
    for n in (1, 2):
        store.update_review(f"demo-{n}", lambda r: setattr(r.policy, "reviewers", Reviewers()))
        store.update_review(f"demo-{n}", lambda r: setattr(r.policy, "approvals_required", 10_000))
    code = DECIDER.format(open_code=impl.open_code(tmp_path / "state"))
    children = [subprocess.Popen([sys.executable, "-c", code, tag, "20"], cwd=ROOT, stdout=subprocess.PIPE,
                                 text=True) for tag in ("p", "q")]
    mine = []
    for i in range(20):  # this process is the serve: it writes the same reviews meanwhile
        vote = approve(f"local:me{i}", f"me-{i}")
        assert store.cast_votes({"demo-1": [(vote, None)]})["demo-1"][0].accepted  # type: ignore[index]
        store.update_review("demo-2", lambda r: setattr(r, "reminded_at", T0))
        mine.append(vote.voter)
    outputs = [child.communicate(timeout=120)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    theirs = [line for out in outputs for line in out.split()]
    assert len(theirs) == 40
    one, two = store.get_review("demo-1"), store.get_review("demo-2")
    assert sorted(v.voter for v in one.history) == sorted(theirs + mine)  # none lost, none doubled
    assert sorted(v.voter for v in two.history) == sorted(theirs) and two.reminded_at == T0


def test_racing_deliveries_of_one_key_are_recorded_once(store: Store) -> None:
    firsts: list[bool] = []
    barrier = threading.Barrier(8)

    def deliver(n: int) -> None:
        barrier.wait()
        firsts.append(recorded(store, "X-GitHub-Delivery 7", [{"n": n}] if n % 2 else None))

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(firsts) == [False] * 7 + [True]
    assert len(store.pending_deliveries()) <= 1


def test_readers_in_many_threads_see_whole_reviews_while_another_writes(store: Store) -> None:
    for n in (1, 2):
        store.update_review(f"demo-{n}", lambda r: setattr(r.policy, "reviewers", Reviewers()))
        store.update_review(f"demo-{n}", lambda r: setattr(r.policy, "approvals_required", 10_000))
    stop = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def read() -> None:
        try:
            while not stop.is_set():
                review = store.get_review("demo-1")
                assert len(review.votes) == len(review.history) == len(review.delivery_keys)
                seen.append(len(review.votes))
                assert [r.id for r in store.open_reviews()] == ["demo-1", "demo-2"]
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            errors.append(err)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for reader in readers:
        reader.start()
    for i in range(30):
        vote = approve(f"local:w{i}", f"w-{i}")
        assert store.cast_votes({"demo-1": [(vote, None)]})["demo-1"][0].accepted  # type: ignore[index]
    stop.set()
    for reader in readers:
        reader.join(timeout=60)
    assert not errors and seen  # every read saw a whole review: votes, history and keys in step
    assert len(store.get_review("demo-1").votes) == 30


def test_a_review_with_thousands_of_votes_keeps_its_dedupe_and_its_audit_trail(
    store: Store, impl: Impl, tmp_path: Path
) -> None:
    voters = VOTERS[:-1]
    for start in range(0, 3000, 50):  # the serve's batches
        batch = [(approve(voters[n % 5], f"k{n}", n), None) for n in range(start, start + 50)]
        assert all(r.accepted for r in store.cast_votes({"demo-1": batch})["demo-1"])  # type: ignore[union-attr]
    again = impl.open(tmp_path / "state")  # a restart: the keys are the database's, not this process's
    redelivered = again.cast_votes({"demo-1": [(approve("local:v3", "k0", 9999), None),
                                               (approve("local:v3", "k2999", 9999), None),
                                               (approve("local:v3", "fresh", 9999), None)]})["demo-1"]
    assert [r.kind for r in redelivered] == ["duplicate", "duplicate", "counted"]  # type: ignore[union-attr]
    review = again.get_review("demo-1")
    assert [(v.voter, v.delivery_key) for v in review.history] == [
        *((voters[n % 5], f"k{n}") for n in range(3000)), ("local:v3", "fresh")]  # every vote, in order
    assert sorted(review.delivery_keys) == sorted([f"k{n}" for n in range(3000)] + ["fresh"])
    assert [v.voter for v in review.votes] == [*voters[:3], *voters[4:], "local:v3"]  # one per person
    assert "k0" not in again.get_review("demo-1", history=False).to_dict()["delivery_keys"]  # read without them
