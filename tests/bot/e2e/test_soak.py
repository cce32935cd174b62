"""Soak: a kill -9 at any instant loses no recorded vote and applies no outcome twice.

Round after round a real ``loopbot serve`` starts, ``loopbot run`` and
``loopbot decide`` subprocesses start runs and vote on them, and a timer
SIGKILLs serve after a random delay - idle, mid-vote, mid-run or mid-apply.
A vote is acknowledged when ``decide`` exits 0, a run request when ``run``
prints its request id (what a person would be told). One last serve then
settles everything and the state dir is checked. The seed is printed; set
LOOPBOT_SOAK_SEED to replay its choices (timing still varies), and
LOOPBOT_SOAK_ROUNDS for a longer or shorter soak.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from bot.store import SqliteStore

from .conftest import Workspace, demo_loop, slow_loop, wait_for

pytestmark = [pytest.mark.soak, pytest.mark.e2e]

ROUNDS = int(os.environ.get("LOOPBOT_SOAK_ROUNDS", "30"))
VOTERS = ("alice", "bob", "carol")
REVIEW = {"approvals_required": 2, "reviewers": {"local": list(VOTERS)}}
REQUEST = re.compile(r"request (\S+)")
DECIDED = re.compile(r"decided: (\w+) by (.+)")
RUN_STATUS = {"approve": "completed", "reject": "rejected"}  # where each loop ends after its one review


@dataclass
class Ledger:
    """What the CLI acknowledged: these must all be in the final state."""

    votes: dict[tuple[str, str], str] = field(default_factory=dict)  # (review, voter) -> decision
    decided: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # review -> [(decision, by)]
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def progress(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Write a line to the terminal even while pytest captures output (``make soak`` has no -s)."""
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"\n[soak] {line}")
            sys.stderr.flush()

    return say


def act(ws: Workspace, rng: random.Random, ledger: Ledger) -> str:
    """One random CLI action - start a run or vote on an open review; what it did, in a few words."""
    open_reviews = sorted(SqliteStore(ws.state_dir).open_reviews(), key=lambda r: r.id)
    if not open_reviews or rng.random() < 0.3:
        loop = rng.choice(["demo", "slow"])
        done = ws.cli("run", loop)
        assert done.returncode == 0, f"loopbot run {loop} failed:\n{done.stdout}{done.stderr}"
        match = REQUEST.search(done.stdout)
        if match:
            ledger.requests.append(match.group(1))
        return f"run {loop}" if match else f"run {loop} (foreground)"
    review = rng.choice(open_reviews)
    voter = rng.choice([v for v in VOTERS if (review.id, v) not in ledger.votes])
    decision = "reject" if rng.random() < 0.25 else "approve"
    done = ws.cli("decide", review.id, decision, "--as", voter, "--feedback", f"soak {decision}")
    if done.returncode != 0:
        return f"{voter} {decision} {review.id} refused: {done.stderr.strip()}"
    ledger.votes[(review.id, voter)] = decision
    decided = DECIDED.search(done.stdout)
    if decided:
        ledger.decided.setdefault(review.id, []).append((decided.group(1), decided.group(2).strip()))
    return f"{voter} {decision} {review.id}" + (" (decides)" if decided else "")


def settled(ws: Workspace, ledger: Ledger) -> dict[str, Any] | None:
    """The status once no run is running, no review waits to be applied and every request has its run."""
    status = ws.status(everything=True)  # every run: the default shows the latest ended ones only
    triggers = {run["trigger"] for run in status["runs"]}
    if any(run["status"] == "running" for run in status["runs"]):
        return None
    if any(review["status"] == "decided" for review in status["reviews"]):
        return None
    return status if all(f"cli ({request})" in triggers for request in ledger.requests) else None


def violations(ws: Workspace, status: dict[str, Any], ledger: Ledger) -> list[str]:
    """Every broken durability promise, one line each."""
    problems = []
    for path in sorted(ws.state_dir.rglob("*.json")):
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            problems.append(f"{path.relative_to(ws.state_dir)} does not parse: {err}")
    reviews = {review["id"]: review for review in status["reviews"]}
    runs = {run["id"]: run for run in status["runs"]}
    for (review_id, voter), decision in sorted(ledger.votes.items()):
        stored = {vote["voter"]: vote["decision"] for vote in reviews[review_id]["votes"]}
        if stored.get(f"local:{voter}") != decision:
            problems.append(f"acknowledged vote {voter} {decision} on {review_id} lost: stored {stored}")
    for review_id, review in sorted(reviews.items()):
        outcome, deciders = review["outcome"], ledger.decided.get(review_id, [])
        if len(deciders) > 1:
            problems.append(f"{review_id} was decided {len(deciders)} times: {deciders}")
        if (outcome is None) != (not deciders):
            problems.append(f"{review_id} has outcome {outcome} but the CLI reported {deciders}")
        elif outcome is not None and (outcome["decision"], ", ".join(outcome["decided_by"])) != deciders[0]:
            problems.append(f"{review_id} outcome {outcome} differs from the one reported: {deciders[0]}")
        markdown = ws.state_dir / "local-reviews" / f"{review_id}.md"
        if markdown.exists() and markdown.read_text(encoding="utf-8").count("Decided: ") > 1:
            problems.append(f"{review_id}: the outcome was posted more than once")
        if review["status"] == "applied" and outcome is not None:
            problems += applied_once(ws, review, runs[review["run"]])
    snapshots = SqliteStore(ws.state_dir)
    for path in sorted((ws.state_dir / "snapshots").glob("*.json")):
        decisions = (snapshots.load_snapshot(path.stem) or {})["decisions"]
        twice = [c for c, n in Counter(d["checkpoint_id"] for d in decisions).items() if n > 1]
        if twice:
            problems.append(f"snapshot {path.name} has more than one decision for {twice}")
    for request in ledger.requests:
        started = [run["id"] for run in runs.values() if run["trigger"] == f"cli ({request})"]
        if len(started) != 1:
            problems.append(f"acknowledged run request {request} started {len(started)} runs: {started}")
    problems += [f"run {run_id} is left running" for run_id, run in runs.items() if run["status"] == "running"]
    return problems


def applied_once(ws: Workspace, review: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """The review's run moved past its checkpoint once, the way the outcome said."""
    problems = []
    snapshot = SqliteStore(ws.state_dir).load_snapshot(run["id"]) or {}  # the engine's state, as the run saved it
    decisions = [d["decision"] for d in snapshot["decisions"] if d["checkpoint_id"] == review["checkpoint"]]
    if decisions != [review["outcome"]["decision"].upper()]:
        problems.append(f"{review['id']} applied to run {run['id']} as {decisions}")
    steps = Counter(o["step_id"] for o in snapshot["observations"])
    if any(n > 1 for n in steps.values()):
        problems.append(f"run {run['id']} recorded a step twice: {dict(steps)}")
    if run["status"] != RUN_STATUS[review["outcome"]["decision"]]:
        problems.append(f"run {run['id']} ended {run['status']} after {review['id']} decided {review['outcome']}")
    return problems


def test_kill9_at_random_instants_loses_no_vote_and_applies_no_outcome_twice(
    ws: Workspace, progress: Callable[[str], None]
) -> None:
    seed = int(os.environ.get("LOOPBOT_SOAK_SEED") or random.SystemRandom().randrange(2**32))
    rng = random.Random(seed)
    progress(f"seed {seed} (replay: LOOPBOT_SOAK_SEED={seed}), {ROUNDS} rounds, state in {ws.state_dir}")
    slow = {**slow_loop(ws.root / "trail", steps=4, delay=0.3, review_after=1), "run_on_start": False}
    ws.write_config([demo_loop(overlap="allow", review=REVIEW), {**slow, "overlap": "allow", "review": REVIEW}])
    ledger = Ledger()
    for round_number in range(1, ROUNDS + 1):
        bot = ws.serve()
        assert bot.proc is not None
        delay = rng.uniform(0.1, 3.0)
        timer = threading.Timer(delay, bot.kill9)
        timer.start()
        done = []
        while bot.proc.poll() is None:
            done.append(act(ws, rng, ledger))
        timer.join()
        assert bot.proc.returncode == -signal.SIGKILL, f"serve exited by itself:\n{bot.log()}"
        done += [act(ws, rng, ledger) for _ in range(rng.randint(0, 2))]  # with no server at all
        progress(f"round {round_number}/{ROUNDS} seed {seed}: kill -9 after {delay:.2f}s; {'; '.join(done) or 'idle'}")

    bot = ws.serve()
    status = wait_for(lambda: settled(ws, ledger), timeout=60, what="runs, reviews and requests to settle")
    assert bot.terminate() == 0
    problems = violations(ws, status, ledger)
    applied = sum(review["status"] == "applied" for review in status["reviews"])
    progress(f"done: {len(status['runs'])} runs, {applied} reviews applied, {len(ledger.votes)} acknowledged votes, "
             f"{len(problems)} violations (seed {seed})\n")
    assert applied and ledger.requests, "the soak exercised nothing: no review applied or no run handed to serve"
    assert not problems, f"seed {seed}:\n" + "\n".join(problems)
