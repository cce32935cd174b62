"""One subscription: a review decided by a vote in this process or by ``loopbot decide`` reaches the runner alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from bot.desk import Authorizer, Decisions, ListMembership, VotePath
from bot.service import Service

from ..runtime_support import bench, demo

ALL = {"local": ListMembership("local"), "slack": ListMembership("slack")}


def test_a_slack_vote_and_a_cli_decide_reach_the_runner_through_the_same_subscription(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo("one", review={"reviewers": {"slack_users": ["U0AAA"]}}), demo("two")])
    first, second = b.runner.run_foreground("one"), b.runner.run_foreground("two")
    assert first is not None and first.review_id and second is not None and second.review_id
    decisions = Decisions()
    reached: list[str] = []

    def runner(review_id: str) -> bool:
        reached.append(review_id)
        return b.runner.apply_decided(review_id)

    decisions.subscribe(runner)
    served = VotePath(b.store, Authorizer(ALL), clock=b.clock, decisions=decisions)
    service = Service(b.store, b.runner, clock=b.clock, decisions=decisions)

    slack = Reply(Identity("slack", "U0AAA", "alice"), parse_command(f"approve {first.review_id}"))
    assert served.handle_many([slack])[0].kind is AnswerKind.DECIDED  # type: ignore[union-attr]
    assert reached == [first.review_id], "the vote path published it at once"
    assert b.runner.join(10)

    cli = VotePath(b.store, Authorizer(ALL), clock=b.clock)  # `loopbot decide`: another process, no runner
    assert cli.handle(Reply(Identity("local", "bob"), parse_command(f"approve {second.review_id}"))).kind \
        is AnswerKind.DECIDED
    assert reached == [first.review_id], "recorded, not applied: no serve in that process"
    service.tick()  # a serve's first tick (at start, or the next one) finds it in the store
    assert b.runner.join(10)
    assert reached == [first.review_id, second.review_id]
    assert b.store.get_run(first.id).status == b.store.get_run(second.id).status == "completed"
    service.tick()
    assert reached == [first.review_id, second.review_id], "applied reviews are not published again"


def test_a_failing_subscriber_does_not_keep_the_others_from_the_decision() -> None:
    decisions = Decisions()
    heard: list[str] = []

    def broken(review_id: str) -> None:
        raise OSError("runner store down")

    decisions.subscribe(broken)
    decisions.subscribe(heard.append)
    with pytest.raises(OSError, match="runner store down"):
        decisions.publish("demo-1")
    assert heard == ["demo-1"]
