"""Run control: the run/cancel/loops grammar, Runner.cancel, who may (operators:), and `loopbot cancel`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.channel import AnswerKind, Identity, Reply
from adapters.command_error import CommandError
from adapters.commands import Command, parse_command, parse_comment
from bot.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from bot.desk import Authorizer, ListMembership, People, VotePath
from bot.desk.control import RunControl
from bot.review_records import Vote
from bot.reviews import cast_vote
from bot.run_report import RUNS_MARKDOWN
from bot.service import Service
from bot.store import SqliteStore
from bot.serve_lock import ROLE_SERVE, ServeLock
from loop_engine.checkpoint import HumanDecision

from .runtime_support import T0, Bench, bench, demo, wait_for
from .slow_loop import trail_lines


# --- the grammar ----------------------------------------------------------------------


def test_run_cancel_and_loops_parse_with_their_targets() -> None:
    assert parse_command("run triage") == Command("run", target="triage")
    assert parse_command("/loopbot cancel triage-run-3 wrong repo".removeprefix("/loopbot ")) == Command(
        "cancel", argument="wrong repo", target="triage-run-3")
    assert parse_command("cancel the plan is wrong") == Command("cancel", argument="the plan is wrong")
    assert parse_command("LOOPS") == Command("loops")
    assert parse_comment("/cancel the plan is wrong") == [Command("cancel", argument="the plan is wrong")]


@pytest.mark.parametrize("text", ["run", "run a b", "loops now"])
def test_a_malformed_control_command_says_its_usage(text: str) -> None:
    error = parse_command(text)
    assert isinstance(error, CommandError) and "usage:" in str(error)


def test_an_unknown_verb_still_offers_the_close_one() -> None:
    error = parse_command("cancle demo-run-1")
    assert isinstance(error, CommandError) and 'did you mean "cancel"' in str(error)


def test_a_control_command_survives_the_webhook_queue() -> None:
    command = Command("cancel", argument="why", target="demo-run-2")
    assert Command.from_dict(command.to_dict()) == command


# --- Runner.cancel ----------------------------------------------------------------------


def _waiting(tmp_path: Path, **loop: Any) -> tuple[Bench, str, str]:
    b = bench(tmp_path, [demo(**loop)])
    run = b.runner.run_foreground("demo")
    assert run is not None and run.status == "waiting" and run.review_id
    return b, run.id, run.review_id


def test_cancelling_a_waiting_run_closes_its_review_and_tells_every_message(tmp_path: Path) -> None:
    b, run_id, review_id = _waiting(tmp_path)
    said = b.runner.cancel(run_id, "local:alice", "wrong week")
    assert said == f"run {run_id} cancelled (cancelled by local:alice: wrong week)"
    run = b.store.get_run(run_id)
    assert (run.status, run.reason) == ("cancelled", "cancelled by local:alice: wrong week")
    review = b.store.get_review(review_id)
    assert (review.status, review.error) == ("cancelled", "cancelled by local:alice: wrong week")
    kind, updated, text = b.channel.calls[-1]
    assert (kind, updated) == ("update", review_id)
    assert text.startswith(f"Run {run_id} cancelled by local:alice: wrong week. Result: 2 iteration(s)")
    audit = (b.config.state_dir / RUNS_MARKDOWN / f"{run_id}.md").read_text()
    assert "**Status:** cancelled - cancelled by local:alice: wrong week" in audit
    assert f"## Review {review_id} (checkpoint_0001): cancelled" in audit
    assert "- **Outcome:** Cancelled by local:alice: wrong week" in audit and "**Error:**" not in audit
    # a vote after it is too late, saying why
    result = b.store.update_review(review_id, lambda r: cast_vote(r, Vote("local:bob", HumanDecision.APPROVE),
                                                                  now=T0))
    assert not result.accepted and "cancelled by local:alice" in result.message
    assert b.store.active_run("demo") is None  # the loop's slot is free again


def test_cancelling_an_ended_run_is_refused(tmp_path: Path) -> None:
    b, run_id, _ = _waiting(tmp_path)
    b.runner.cancel(run_id, "local:alice")
    with pytest.raises(ValueError, match="already ended \\(cancelled\\)"):
        b.runner.cancel(run_id, "local:bob")


def _slow(tmp_path: Path, **options: Any) -> dict[str, Any]:
    return {"name": "slow", "factory": "tests.bot.slow_loop:build",
            "options": {"trail": str(tmp_path / "trail"), "delay": 0, **options}}


def test_cancelling_a_running_run_stops_it_at_its_next_step_boundary(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    b = bench(tmp_path, [_slow(tmp_path, gate=str(gate))])
    run_id = b.runner.request_run("slow", trigger="cli")
    assert run_id is not None
    wait_for(lambda: trail_lines(tmp_path / "trail"), what="step 1 started")
    said = b.runner.cancel(run_id, "local:alice", "not today")
    assert "stops at its next step boundary" in said
    assert b.store.get_run(run_id).status == "running"  # the step in flight is not cut off
    gate.touch()  # the step finishes
    assert b.runner.join(10)
    run = b.store.get_run(run_id)
    assert (run.status, run.reason) == ("cancelled", "cancelled by local:alice: not today")
    assert [line.split()[:2] for line in trail_lines(tmp_path / "trail")] == [["start", "step_1"], ["done", "step_1"]]


# --- who may: operators ----------------------------------------------------------------------


def _control(b: Bench, started: list[str] | None = None) -> VotePath:
    authorizer = Authorizer({"local": ListMembership("local")}, People())

    def start(loop: str, trigger: str) -> str | None:
        run_id = b.runner.request_run(loop, trigger=trigger)
        if run_id is not None and started is not None:
            started.append(trigger)
        return run_id

    control = RunControl(b.store, authorizer, b.config.loops, start=start, cancel=b.runner.cancel,
                         listing=lambda: "the loops")
    return VotePath(b.store, authorizer, clock=b.clock, control=control)


def _say(votes: VotePath, text: str, who: str = "alice", channel: str = "local") -> Any:
    return votes.handle(Reply(Identity(channel, who, who), parse_command(text), via="test"))


def test_operators_default_to_the_reviewers_and_everyone_else_is_told_who_may(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])  # reviewers: local alice, bob
    started: list[str] = []
    votes = _control(b, started)
    refused = _say(votes, "run demo", who="mallory")
    assert refused.kind is AnswerKind.REFUSED
    assert "not started" in refused.text and "alice, bob" in refused.text and "operators of loop demo" in refused.text
    answer = _say(votes, "run demo")
    assert answer.kind is AnswerKind.INFO and answer.text.startswith("started run demo-run-1 of loop demo")
    assert started == ["test by local:alice"]
    b.runner.join(10)
    busy = _say(votes, "run demo", who="bob")
    assert busy.kind is AnswerKind.REFUSED
    assert "already has an active run: demo-run-1 is waiting on review demo-1" in busy.text
    assert _say(votes, "cancel demo-run-1 no", who="mallory").kind is AnswerKind.REFUSED
    assert b.store.get_run("demo-run-1").status == "waiting"
    done = _say(votes, "cancel demo-run-1 no")
    assert done.kind is AnswerKind.INFO and done.text == "Run demo-run-1 cancelled (cancelled by local:alice: no)"


def test_operators_replace_the_reviewers_when_given(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo(operators={"local": ["oscar"]})])
    votes = _control(b)
    assert _say(votes, "run demo", who="alice").kind is AnswerKind.REFUSED  # a reviewer, not an operator
    assert _say(votes, "run demo", who="oscar").text.startswith("started run demo-run-1")


def test_unknown_loops_get_a_did_you_mean_and_github_never_starts_a_run(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    votes = _control(b)
    unknown = _say(votes, "run dmeo")
    assert unknown.kind is AnswerKind.INVALID and 'did you mean "demo"' in unknown.text
    github = _say(votes, "run demo", channel="github")
    assert github.kind is AnswerKind.REFUSED and "does not start a run" in github.text
    assert b.store.list_runs() == []
    assert _say(votes, "loops").text == "the loops"
    assert _say(votes, "cancel demo-run-9").kind is AnswerKind.UNKNOWN_REVIEW


def test_without_a_server_the_control_verbs_say_where_they_are_answered(tmp_path: Path) -> None:
    b = bench(tmp_path, [demo()])
    votes = VotePath(b.store, Authorizer({"local": ListMembership("local")}), clock=b.clock)
    answer = _say(votes, "run demo")
    assert answer.kind is AnswerKind.INVALID and "loopbot serve" in answer.text


# --- `loopbot cancel` ----------------------------------------------------------------------


def _config(tmp_path: Path) -> Path:
    b, _, _ = _waiting(tmp_path)
    return tmp_path / "config.yaml"


def test_loopbot_cancel_with_no_server_ends_the_run_here(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path)
    monkeypatch.setenv("LOOPBOT_USER", "mallory")
    assert main(["--config", str(config), "cancel", "demo-run-1"]) == EXIT_FAILED
    assert "cancel refused" in capsys.readouterr().err
    assert main(["--config", str(config), "cancel", "demo-run-1", "--as", "bob", "--reason", "wrong week"]) == EXIT_OK
    assert "run demo-run-1 cancelled (cancelled by local:bob: wrong week)" in capsys.readouterr().out
    store = SqliteStore(tmp_path / "state")
    assert store.get_run("demo-run-1").status == "cancelled"
    assert store.get_review("demo-1").status == "cancelled"
    assert "Run demo-run-1 cancelled by local:bob: wrong week." in (
        tmp_path / "state/local-reviews/demo-1.md").read_text()
    assert main(["--config", str(config), "cancel", "demo-run-1", "--as", "bob"]) == EXIT_FAILED
    assert "already ended (cancelled)" in capsys.readouterr().err
    assert main(["--config", str(config), "cancel", "demo-run-7", "--as", "bob"]) == EXIT_USAGE


def test_loopbot_cancel_beside_a_server_hands_it_over_and_the_tick_applies_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b, run_id, _ = _waiting(tmp_path)
    lock = ServeLock(b.config.state_dir)
    lock.acquire(role=ROLE_SERVE)
    try:
        code = main(["--config", str(tmp_path / "config.yaml"), "cancel", run_id, "--as", "alice"])
    finally:
        lock.release()
    assert code == EXIT_OK and "handed to the running server" in capsys.readouterr().out
    assert b.store.get_run(run_id).status == "waiting"  # the server does it, at its tick
    Service(b.store, b.runner, clock=b.clock).tick()
    assert (b.store.get_run(run_id).status, b.store.get_run(run_id).reason) == ("cancelled", "cancelled by local:alice")
    Service(b.store, b.runner, clock=b.clock).tick()  # handled once: the request is gone


def test_status_json_shows_the_cancelled_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    b, run_id, _ = _waiting(tmp_path)
    b.runner.cancel(run_id, "local:alice", "why")
    capsys.readouterr()
    assert main(["--config", str(tmp_path / "config.yaml"), "status", "--json"]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    shown = [(r["id"], r["status"], r["reason"]) for r in document["runs"]]
    assert shown == [(run_id, "cancelled", "cancelled by local:alice: why")]
    assert [(r["status"], r["reason"]) for r in document["reviews"]] == [("cancelled", "cancelled by local:alice: why")]


# --- a loop's own code fails ------------------------------------------------------------------


def test_a_raising_step_logs_one_traceback_and_keeps_its_file_and_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import logging

    from .slow_loop import FAIL_LINE, FAIL_MESSAGE

    b = bench(tmp_path, [_slow(tmp_path, fail_at=2)])
    with caplog.at_level(logging.INFO):
        run = b.runner.run_foreground("slow")
    assert run is not None and run.status == "waiting" and run.review_id  # retried, then asks a person
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 1, [r.getMessage() for r in tracebacks]  # once, however often the step was retried
    (record,) = tracebacks
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"run {run.id}, step step_2: the actor raised RuntimeError: {FAIL_MESSAGE}")
    assert f"slow_loop.py:{FAIL_LINE}" in record.getMessage()
    capsys.readouterr()
    assert main(["--config", str(tmp_path / "config.yaml"), "status", "--json"]) == EXIT_OK
    (shown,) = json.loads(capsys.readouterr().out)["runs"]
    failure = shown["result"]["failures"][0]
    assert failure["step"] == "step_2" and failure["source"] == "actor"
    assert failure["file"].endswith("tests/bot/slow_loop.py") and failure["line"] == FAIL_LINE
    # the review's diagnostics (its request's summary) say where, too
    assert f"slow_loop.py:{FAIL_LINE}" in json.dumps(b.store.get_review(run.review_id).request)
