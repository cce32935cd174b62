"""A triage MODIFY the loop would drop is refused when the vote is cast, on Slack as on every channel.

The vote path asks the loop (``LoopCatalog.modification_problem``, the
triage spec's hook); the review stays open and the voter is told the
labels it may use.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from bot.config import BotConfig
from bot.desk import Authorizer, ListMembership, VotePath
from bot.patterns import LoopSpec, get_pattern
from bot.store import SqliteStore
from bot.loop_catalog import LoopCatalog

from ..desk.support import make_review
from ..runtime_support import FakeClock

SLACK_ALICE = Identity("slack", "U0AAA", "alice")


def _votes(tmp_path: Path) -> tuple[VotePath, SqliteStore]:
    config = BotConfig.model_validate({
        "state_dir": str(tmp_path / "state"),
        "loops": [{"name": "daily-triage", "pattern": "daily-triage",
                   "options": {"repository": "octo/ops", "labels": {"P0": "urgent"}}}],
    })
    store = SqliteStore(tmp_path / "state")
    store.put_review(replace(make_review("daily-triage-1", slack_users=["U0AAA"]), loop="daily-triage",
                             run_id="daily-triage-run-1"))
    catalog = LoopCatalog(config)
    votes = VotePath(store, Authorizer({"slack": ListMembership("slack")}), clock=FakeClock(),
                     loop_check=catalog.modification_problem)
    return votes, store


def test_a_label_outside_the_set_is_refused_on_slack(tmp_path: Path) -> None:
    votes, store = _votes(tmp_path)
    answer = votes.handle(Reply(SLACK_ALICE, parse_command("modify daily-triage-1 skip=#12 label.#15=P0")))
    assert answer.kind is AnswerKind.REFUSED
    assert answer.text == ("vote refused: label.#15: P0 is not a label daily-triage adds; "
                           "the labels it may add: urgent, P1, P2, stale, needs-reviewer")
    review = store.get_review("daily-triage-1")
    assert review.votes == [] and review.outcome is None


def test_a_label_in_the_set_decides(tmp_path: Path) -> None:
    votes, store = _votes(tmp_path)
    answer = votes.handle(Reply(SLACK_ALICE, parse_command("modify daily-triage-1 skip=#12 label.#15=urgent")))
    assert answer.kind is AnswerKind.DECIDED, answer.text
    [vote] = store.get_review("daily-triage-1").votes
    assert vote.modifications == {"context": {"skip": "#12", "label": {"#15": "urgent"}}}


def raising_build(options: dict[str, object]) -> LoopSpec:
    """A factory whose modify check fails: its failure must not refuse (or lose) the vote."""
    demo = get_pattern("demo")({})

    def broken(changes: dict[str, object]) -> str | None:
        raise RuntimeError("bug in the loop")

    return replace(demo, modification_problem=broken)


def test_a_loop_check_that_fails_refuses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = BotConfig.model_validate({
        "state_dir": str(tmp_path / "state"),
        "loops": [{"name": "mine", "factory": "tests.bot.patterns.test_triage_votes:raising_build"}],
    })
    with caplog.at_level("ERROR", logger="bot.loop_catalog"):
        assert LoopCatalog(config).modification_problem("mine", {"context": {"a": 1}}) is None
    assert "loop mine: modification_problem(changes) failed" in caplog.text
