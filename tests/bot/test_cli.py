"""The loopbot command in-process: exit codes, messages, nothing changed on refusal, no secrets."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, main
from bot.cli_common import decide_command
from bot.store import SqliteStore
from bot.patterns import LoopSpec
from bot.patterns.demo import build as demo_build
from bot.store.base import RunRecord
from loop_engine.engine import LoopEngine
from loop_engine.types import LoopContext
from bot.serve_lock import ROLE_RUN, ROLE_SERVE, ServeLock

from .runtime_support import T0, demo, state_fingerprint, write_config

TOKEN = "xoxb-1111-2222-abcdefghijkl"
SIGNING = "signing-secret-value-42"


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("LOOPBOT_CONFIG", raising=False)
    monkeypatch.setenv("LOOPBOT_USER", "alice")
    monkeypatch.setenv("SLACK_TOKEN", TOKEN)
    yield
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_loopbot", False)]:
        root.removeHandler(handler)


def installed(folder: Path) -> Path:
    """An executable ``loopbot`` file in ``folder``, standing in for a console script."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "loopbot"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return program


@pytest.fixture(autouse=True)
def _loopbot_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In-process sys.argv[0] is pytest's: make it a `loopbot` that PATH finds, as after `pip install`."""
    program = installed(tmp_path / "installed-bin")
    monkeypatch.setattr(sys, "argv", [str(program)])
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return program


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path, [demo(), demo("nightly")], slack={"bot_token": "${SLACK_TOKEN}", "signing_secret": SIGNING}
    )


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes:" in text and "2  usage" in text and "3  serve" in text
    assert "130, 143  run: stopped by Ctrl-C (SIGINT) or SIGTERM" in text
    flat = " ".join(text.split())
    assert "an unusable store or state_dir (the message names the file: permission denied, disk full, read-only, " \
        "a symlink, a file where a directory should be)" in flat
    assert "a --set value that cannot be stored (NaN, 1e999, nested deeper than 32 levels, over 64 KiB); " \
        "an argument that is not valid UTF-8" in flat
    assert "reject without --feedback" in flat


def test_check_prints_a_summary_without_secrets(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "check", "--offline", "--config", str(config))
    assert code == EXIT_OK
    assert "OK" in out and "demo: pattern demo" in out and "nightly" in out
    assert "channels: local, slack (POST /slack/events)" in out
    assert TOKEN not in out + err and SIGNING not in out + err


def test_check_names_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, [demo(schedule={"interval": "soon"})])
    code, out, err = cli(capsys, "--config", str(path), "check")
    assert code == EXIT_FAILED
    assert f"{path}: loops[0].schedule" in err


def test_missing_config_says_what_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "check", "--config", str(tmp_path / "nope.yaml"))
    assert code == EXIT_FAILED and "config.example.yaml" in err


def test_config_comes_from_the_environment(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPBOT_CONFIG", str(config))
    assert cli(capsys, "check", "--offline")[0] == EXIT_OK


def test_run_unknown_loop_lists_the_loops(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "run", "nightli", "--config", str(config))
    assert code == EXIT_USAGE
    assert 'did you mean "nightly"' in err and "demo, nightly" in err


def test_run_in_the_foreground_pauses_and_prints_the_decide_line(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    assert code == EXIT_OK
    assert "run demo-run-1: waiting" in out
    assert f"approve with: loopbot --config {config} decide demo-1 approve" in out
    assert "local-reviews/demo-1.md" in out
    assert "once it is decided, `loopbot apply` (or `loopbot run` again, or `loopbot serve`) resumes the run" in out
    assert "leave it running" not in out  # no server runs while a foreground run holds the state dir


def test_the_printed_line_says_as_when_the_user_is_no_local_reviewer_and_works_when_pasted(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13 item 3: `root` is not one of alice, bob - the line names --as and who may answer."""
    monkeypatch.setenv("LOOPBOT_USER", "root")
    code, out, _ = cli(capsys, "run", "demo", "--config", str(config))
    assert code == EXIT_OK
    line = f"loopbot --config {config} decide demo-1 approve --as NAME"
    assert f"approve with: {line}\n  (NAME: one of the local reviewers alice, bob" in out
    assert f"\n{line}\n" in (config.parent / "state/local-reviews/demo-1.md").read_text()
    code, out, _ = cli(capsys, *shlex.split(line.replace("NAME", "bob"))[1:])
    assert code == EXIT_OK and "decided: approve by local:bob" in out


def test_run_of_a_loop_with_a_waiting_run_refuses_naming_the_review(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    assert code == EXIT_FAILED and out == ""
    assert "not started: loop demo already has an active run: demo-run-1 is waiting on review demo-1 (" in err
    assert f"approve with: loopbot --config {config} decide demo-1 approve" in err
    assert len(SqliteStore(config.parent / "state").list_runs()) == 1


def test_run_of_a_loop_whose_review_is_decided_applies_it_then_starts_the_new_run(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No server needed to move on: the foreground run applies the decided review itself."""
    cli(capsys, "run", "demo", "--config", str(config))
    _, out, _ = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    assert "`loopbot apply` resumes the run now" in out
    code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    assert code == EXIT_OK, err
    store = SqliteStore(config.parent / "state")
    assert store.get_review("demo-1").status == "applied"
    assert store.get_run("demo-run-1").status == "completed"
    assert out.startswith("run demo-run-1: completed")
    assert "run demo-run-2: waiting" in out


def test_apply_applies_a_decided_review_without_a_server(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, _ = cli(capsys, "apply", "--config", str(config))
    assert code == EXIT_OK and "nothing to apply" in out
    cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    code, out, err = cli(capsys, "apply", "--config", str(config))
    assert code == EXIT_OK, err
    assert out.startswith("run demo-run-1: completed")
    assert SqliteStore(config.parent / "state").get_review("demo-1").status == "applied"


def test_run_of_a_loop_whose_run_was_interrupted_continues_it_first(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted before its first save: continued here (from the start), so the loop's slot stays taken."""
    store = SqliteStore(config.parent / "state")
    store.put_run(
        RunRecord(id="demo-run-1", loop="demo", status="running", created_at=T0, updated_at=T0, trigger="cli")
    )
    code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    assert out.startswith("run demo-run-1: waiting (review demo-1)")
    assert code == EXIT_FAILED  # demo-run-1 now waits on its review: no second run of the loop
    assert "not started: loop demo already has an active run: demo-run-1 is waiting on review demo-1" in err


def test_status_json_shape_and_no_secrets(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    store = SqliteStore(config.parent / "state")
    store.update_run("demo-run-1", lambda r: setattr(r, "reason", f"echoed {TOKEN} and {SIGNING}"))
    code, out, err = cli(capsys, "status", "--json", "--config", str(config))
    assert code == EXIT_OK
    data = json.loads(out)
    run, = data["runs"]
    assert {"id", "loop", "status", "created_at", "updated_at", "review"} <= set(run)
    assert (run["id"], run["loop"], run["status"], run["review"]) == ("demo-run-1", "demo", "waiting", "demo-1")
    review, = data["reviews"]
    assert {"id", "run", "loop", "status", "approvals", "required", "votes"} <= set(review)
    assert (review["id"], review["run"], review["status"], review["approvals"], review["required"]) == (
        "demo-1", "demo-run-1", "open", 0, 1,
    )
    assert TOKEN not in out and SIGNING not in out
    code, table, _ = cli(capsys, "status", "--config", str(config))
    assert "demo-run-1" in table and f"loopbot --config {config} decide demo-1 approve" in table
    assert TOKEN not in table


@pytest.mark.parametrize(
    ("role", "said"),
    [(ROLE_SERVE, "resumes the run within a second"), (ROLE_RUN, "resumes when `loopbot serve` next starts")],
)
def test_decide_says_who_will_apply_it_by_what_holds_the_state_dir(
    config: Path, capsys: pytest.CaptureFixture[str], role: str, said: str
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    holder = ServeLock(config.parent / "state")
    holder.acquire(role=role)
    try:
        code, out, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    finally:
        holder.release()
    assert code == EXIT_OK, err
    assert said in out and f"(pid {os.getpid()})" in out


def test_decide_records_a_vote_and_says_who_applies_it(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, err = cli(capsys, "decide", "DEMO-1", "lgtm", "--config", str(config))
    assert code == EXIT_OK, err
    assert "decided: approve by local:alice" in out and "no server is running" in out
    review = SqliteStore(config.parent / "state").get_review("demo-1")
    assert review.status == "decided" and review.votes[0].voter == "local:alice"


def test_decide_votes_as_user_when_loopbot_user_is_unset(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOPBOT_USER")
    monkeypatch.setenv("USER", "bob")
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    assert code == EXIT_OK, err
    assert SqliteStore(config.parent / "state").get_review("demo-1").votes[0].voter == "local:bob"


def test_without_user_the_example_config_and_decide_agree_on_the_login_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Containers often lack $USER: the example's `${USER:-you}` reviewer must still be who decide votes as."""
    example = (Path(__file__).parents[2] / "config.example.yaml").read_text()
    config = tmp_path / "config.yaml"
    config.write_text(example.replace("state_dir: ./state", f"state_dir: {tmp_path / 'state'}"))
    monkeypatch.delenv("LOOPBOT_USER")
    monkeypatch.setenv("USER", "")  # unset, as far as loopbot is concerned; restored afterwards
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    assert cli(capsys, "run", "demo", "--config", str(config))[0] == EXIT_OK
    code, out, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    assert code == EXIT_OK, err
    assert SqliteStore(tmp_path / "state").get_review("demo-1").votes[0].voter == "local:ops"


def test_with_no_name_at_all_decide_asks_who_votes(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    monkeypatch.delenv("LOOPBOT_USER")
    monkeypatch.setenv("USER", "")  # unset, as far as loopbot is concerned; restored afterwards

    def no_login_name() -> str:
        raise KeyError("getpwuid(): uid not found: 12345")

    monkeypatch.setattr("getpass.getuser", no_login_name)
    code, _, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    assert code == EXIT_USAGE and "pass --as NAME or set LOOPBOT_USER" in err
    assert SqliteStore(config.parent / "state").get_review("demo-1").votes == []


def test_decide_modify_with_set_values(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "modify", "--set", "context.items=2", "--set", "context.note=ok",
                       "--as", "bob", "--config", str(config))
    assert code == EXIT_OK, err
    outcome = SqliteStore(config.parent / "state").get_review("demo-1").outcome
    assert outcome is not None and outcome.modifications == {"context": {"items": 2, "note": "ok"}}
    assert outcome.decided_by == ["local:bob"]


@pytest.mark.parametrize("option", ["--set=--", "--as=--", "--feedback=--"])
def test_an_option_whose_value_is_a_double_dash_is_judged_as_text(
        config: Path, capsys: pytest.CaptureFixture[str], option: str) -> None:
    """argparse (3.11) hands ``--set=--`` over as [], which crashed parse_assignments; it is the text "--"."""
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", option, "--config", str(config), "--", "demo-1", "modify"
                       if option == "--set=--" else "reject")
    assert code in (EXIT_OK, EXIT_USAGE, EXIT_FAILED) and "Traceback" not in err, err
    if option == "--set=--":
        assert code == EXIT_USAGE and 'key=value, got "--"' in err, err


def test_the_modify_line_the_review_file_prints_is_accepted(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    text = (config.parent / "state" / "local-reviews" / "demo-1.md").read_text()
    [line] = [line for line in text.splitlines() if " modify " in line]
    assert "NAME: one of the local reviewers alice, bob" in text
    words = shlex.split(line.replace("--as NAME", "--as alice"))  # as the file says: NAME is one of them
    code, _, err = cli(capsys, *words[words.index("decide"):], "--config", str(config))
    assert code == EXIT_OK, err
    assert SqliteStore(config.parent / "state").get_review("demo-1").status == "decided"


def test_a_plan_change_the_run_cannot_make_is_refused_when_cast_naming_the_plans_steps(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13 item 8: plan.skip of an unknown step was accepted, then failed the run when it resumed."""
    cli(capsys, "run", "demo", "--config", str(config))
    store = SqliteStore(config.parent / "state")
    for change, why in [
        ('plan.skip=["aply"]', "plan.skip names step(s) the run's plan does not have: aply; "
                               "its steps: collect, propose, apply, report"),
        ('plan.add=[{"id": "apply"}]', "plan.add: a step 'apply' is already in the plan"),
        ('plan.add=[{"id": "notify", "dependencies": ["mail"]}]',
         "plan.add: step 'notify' depends on unknown step(s) mail"),
    ]:
        code, _, err = cli(capsys, "decide", "demo-1", "modify", "--set", change, "--config", str(config))
        assert code == EXIT_FAILED and f"vote refused: {why}" in err
        assert store.get_review("demo-1").history == []  # nothing recorded
    code, out, err = cli(capsys, "decide", "demo-1", "modify", "--set", 'plan.skip=["report"]',
                         "--set", 'plan.add=[{"id": "notify", "dependencies": ["apply"]}]', "--config", str(config))
    assert code == EXIT_OK, err
    assert store.get_review("demo-1").status == "decided"


def test_decide_pause_takes_a_duration(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    before = datetime.now(UTC)
    code, out, err = cli(capsys, "decide", "demo-1", "pause", "2h", "--config", str(config))
    assert code == EXIT_OK, err
    review = SqliteStore(config.parent / "state").get_review("demo-1")
    assert review.status == "open" and review.paused_until is not None
    assert before + timedelta(hours=2) <= review.paused_until <= datetime.now(UTC) + timedelta(hours=2)
    assert "paused until" in out


def test_decide_pause_until_a_time_without_a_zone_is_refused(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "pause", "--set", "until=2031-01-01T00:00", "--config", str(config))
    assert code == EXIT_USAGE and "has no time zone" in err and "2031-01-01T00:00Z" in err
    assert SqliteStore(config.parent / "state").get_review("demo-1").paused_until is None
    code, _, err = cli(capsys, "decide", "demo-1", "pause", "--set", "until=2031-01-01T00:00Z", "--config", str(config))
    assert code == EXIT_OK, err
    assert SqliteStore(config.parent / "state").get_review("demo-1").paused_until == datetime(2031, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["demo-9", "approve"], EXIT_USAGE, "no review 'demo-9' - did you mean \"demo-1\""),
        (["demo-1", "aprove"], EXIT_USAGE, 'did you mean "approve"'),
        (["demo-1", "modify", "--set", "novalue"], EXIT_USAGE, "key=value"),
        (["demo-1", "modify", "--set", "note=x"], EXIT_USAGE, "e.g. context.note=VALUE"),
        (["demo-1", "modify", "--set", "note=x"], EXIT_USAGE, "usage: loopbot decide REVIEW modify --set context.KEY"),
        (["demo-1", "modify", "--set", "context=5"], EXIT_USAGE, "context takes keys under it"),
        (["demo-1", "approve", "--set", "context.a=1"], EXIT_USAGE, "approve takes no changes"),
        (["demo-1", "approve", "2h"], EXIT_USAGE, "only pause takes a duration"),
        (["demo-1", "pause", "soon"], EXIT_USAGE, "invalid duration 'soon'"),
        (["demo-1", "pause", "2h", "--set", "until=2031-01-01T00:00Z"], EXIT_USAGE, "not both"),
        (["demo-1", "pause", "--set", "until=2020-01-01T00:00Z"], EXIT_USAGE, "is in the past"),
        (["demo-1", "pause", "--set", "until=2031-01-01T00:00", "--as", "mallory"], EXIT_USAGE, "no time zone"),
        # one rule (issue 13 item 8): a line wrong by itself is usage (2); what the review refuses is 1
        (["demo-1", "approve", "--as", "mallory"], EXIT_FAILED, "mallory is not a reviewer"),
        (["demo-1", "reject"], EXIT_USAGE, "a reject needs a reason"),
    ],
)
def test_refusals_exit_non_zero_and_change_nothing(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    state = config.parent / "state"
    before = state_fingerprint(state)
    got, out, err = cli(capsys, "decide", *args, "--config", str(config))
    assert got == code
    assert message in err
    assert state_fingerprint(state) == before


def test_an_unknown_decision_word_gets_the_cli_usage_not_the_chat_help(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "aprove", "--config", str(config))
    assert code == EXIT_USAGE
    assert err.splitlines() == [
        'loopbot: unknown decision "aprove" - did you mean "approve"?',
        "usage: loopbot decide REVIEW DECISION [DURATION] [--feedback TEXT] [--set KEY=VALUE ...] [--as NAME]",
        "decisions: approve (lgtm, yes), reject (deny, no), retry, modify, pause",
    ]


def test_a_reject_without_a_reason_is_told_the_cli_line(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "reject", "--config", str(config))
    assert code == EXIT_USAGE  # a missing argument, as modify without --set
    line = f'loopbot --config {config} decide demo-1 reject --feedback "the labels are wrong"'
    assert f"a reject needs a reason: {line}" in err
    assert "`reject the labels" not in err
    assert SqliteStore(config.parent / "state").get_review("demo-1").votes == []


def test_someone_who_may_not_vote_is_told_so_before_anything_about_reasons(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "reject", "--as", "mallory", "--config", str(config))
    assert code == EXIT_FAILED and "mallory is not a reviewer" in err and "needs a reason" not in err


def test_status_says_who_applies_a_decided_review(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    _, table, _ = cli(capsys, "status", "--config", str(config))
    assert "(applied by `loopbot apply`, or when `loopbot run` or `serve` starts)" in table
    server = ServeLock(config.parent / "state")
    server.acquire(role=ROLE_SERVE)
    try:
        _, table, _ = cli(capsys, "status", "--config", str(config))
    finally:
        server.release()
    assert "(being applied)" in table


def test_a_late_vote_is_told_who_decided(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    assert cli(capsys, "decide", "demo-1", "approve", "--config", str(config))[0] == EXIT_OK
    code, _, err = cli(capsys, "decide", "demo-1", "approve", "--as", "bob", "--config", str(config))
    assert code == EXIT_FAILED and "already decided by local:alice" in err


def test_serve_on_a_taken_port_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from bot.serve_lock import ServeLock

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        path = write_config(tmp_path, [demo()], server={"port": taken.getsockname()[1]})
        code, _, err = cli(capsys, "serve", "--config", str(path))
    finally:
        taken.close()
    assert code == EXIT_FAILED and "cannot serve on 127.0.0.1:" in err
    port = path.read_text().split("port: ")[1].split()[0]
    assert f"port {port} is taken; set server.port or $PORT (0 picks a free one)" in err
    assert ServeLock.holder(tmp_path / "state") is None  # the lock was released


# -- check, run and serve refuse loops that cannot be built ----------------------------------------


def returns_none(options: dict[str, object]) -> None:
    """A factory that forgot its return."""


def broken_engine(options: dict[str, object]) -> LoopSpec:
    def engine_factory(**_: object) -> LoopEngine:
        raise KeyError("model")

    return LoopSpec(engine_factory=engine_factory, context_factory=LoopContext)


def wrong_context(options: dict[str, object]) -> LoopSpec:
    spec = demo_build({})
    return LoopSpec(engine_factory=spec.engine_factory, context_factory=lambda: {"goal": "x"})  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    ("loop", "line"),
    [
        ({"name": "a", "pattern": "demoo"}, 'loops[0].pattern: unknown pattern "demoo" - did you mean "demo"?'),
        (
            {"name": "a", "factory": "nosuch.mod:build"},
            'loops[0].factory: cannot import nosuch.mod: module "nosuch" not found; is it installed or on PYTHONPATH?',
        ),
        (
            {"name": "a", "pattern": "demo", "options": {"items": 500}},
            "loops[0].options: demo: option items must be a whole number from 1 to 100, got 500",
        ),
        (
            {"name": "a", "factory": f"{__name__}:returns_none"},
            f"loops[0].factory: {__name__}:returns_none returned NoneType, not a LoopSpec; "
            "return LoopSpec(engine_factory=..., context_factory=...) (from bot.patterns)",
        ),
        (
            {"name": "a", "factory": f"{__name__}:broken_engine"},
            f"loops[0].factory: {__name__}:broken_engine: engine_factory raised KeyError: 'model'",
        ),
        (
            {"name": "a", "factory": f"{__name__}:wrong_context"},
            f"loops[0].factory: {__name__}:wrong_context: context_factory returned dict, not a LoopContext",
        ),
    ],
    ids=["unknown-pattern", "missing-module", "bad-options", "not-a-spec", "engine-raises", "not-a-context"],
)
def test_a_loop_that_cannot_be_built_is_a_config_error_for_check_run_and_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], loop: dict[str, object], line: str
) -> None:
    path = write_config(tmp_path, [loop])
    for command in (["check"], ["run", "a"], ["serve"]):
        code, out, err = cli(capsys, *command, "--config", str(path))
        assert code == EXIT_FAILED, command
        assert f"invalid config:\n{path}: {line}" in err, command
        assert "OK" not in out and "Traceback" not in err
    assert not (tmp_path / "state").exists()  # nothing started, nothing stuck "running"


def test_status_and_decide_do_not_import_factories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Importing a factory runs user code: only the commands that build loops do it."""
    path = write_config(tmp_path, [{"name": "a", "factory": "nosuch.mod:build"}])
    assert cli(capsys, "status", "--config", str(path))[0] == EXIT_OK
    code, _, err = cli(capsys, "decide", "a-1", "approve", "--config", str(path))
    assert code == EXIT_USAGE and "no review 'a-1'" in err  # not "invalid config"


# -- run while the state dir is locked ---------------------------------------------------------------


def test_run_while_a_foreground_run_holds_the_state_dir_refuses(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = config.parent / "state"
    other = ServeLock(state)
    other.acquire(role=ROLE_RUN)
    try:
        code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    finally:
        other.release()
    assert code == EXIT_LOCKED
    assert f"a foreground `loopbot run` (pid {os.getpid()}" in err and "loopbot serve" in err
    assert "handed" not in out
    assert not (state / "inbox").exists() or not list((state / "inbox").iterdir())  # no surprise run later


def test_run_while_a_server_holds_the_state_dir_hands_it_over(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = config.parent / "state"
    server = ServeLock(state)
    server.acquire(role=ROLE_SERVE, port=8123)
    try:
        code, out, _ = cli(capsys, "run", "demo", "--config", str(config))
    finally:
        server.release()
    assert code == EXIT_OK and f"handed to the running server (pid {os.getpid()}): request request-1" in out
    assert [r.payload["loop"] for r in SqliteStore(state).take_requests()] == ["demo"]
    assert SqliteStore(state).list_runs() == []


def test_run_a_server_would_skip_is_refused_with_what_holds_the_loop(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = config.parent / "state"
    cli(capsys, "run", "demo", "--config", str(config))  # demo-run-1 waits on demo-1
    server = ServeLock(state)
    server.acquire(role=ROLE_SERVE, port=8123)
    try:
        code, out, err = cli(capsys, "run", "demo", "--config", str(config))
    finally:
        server.release()
    assert code == EXIT_FAILED and "handed" not in out
    assert "not started: loop demo already has an active run: demo-run-1 is waiting on review demo-1" in err
    assert "decide demo-1 approve" in err
    assert SqliteStore(state).take_requests() == []  # nothing queued for the server to skip


# -- the decide line must run when pasted -------------------------------------------------------------


def test_after_make_run_the_decide_line_names_the_venv_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make run` starts .venv/bin/loopbot, which a fresh shell does not find as `loopbot`."""
    installed(tmp_path / ".venv" / "bin")
    write_config(tmp_path, [demo()])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/loopbot"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, _ = cli(capsys, "run", "demo", "--config", "config.yaml")
    assert code == EXIT_OK
    assert "approve with: .venv/bin/loopbot decide demo-1 approve" in out
    assert ".venv/bin/loopbot decide demo-1 approve" in (tmp_path / "state/local-reviews/demo-1.md").read_text()


def test_the_decide_line_says_loopbot_only_when_path_finds_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _loopbot_on_path: Path
) -> None:
    assert decide_command(Path("my config.yaml")) == "loopbot --config 'my config.yaml' decide"
    elsewhere = installed(tmp_path / "other-install")  # PATH finds another (older?) loopbot first
    monkeypatch.setattr(sys, "argv", [str(elsewhere)])
    assert decide_command(Path("config.yaml")) == f"{elsewhere} decide"  # outside the cwd: absolute
    monkeypatch.chdir(tmp_path)
    assert decide_command(Path("config.yaml")) == "other-install/loopbot decide"
    monkeypatch.setattr(sys, "argv", [str(installed(tmp_path))])
    assert decide_command(Path("config.yaml")) == "./loopbot decide"  # never a bare name PATH would look up


def test_the_decide_line_of_python_m_bot_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [str(Path(__file__).parents[2] / "bot" / "cli.py")])
    monkeypatch.chdir("/")
    assert decide_command(Path("config.yaml")) == f"{shlex.quote(os.path.abspath(sys.executable))} -m bot.cli decide"


# -- channel secrets: only the commands that talk to Slack or GitHub need their variables ----------

SLACK_FROM_ENV = {"bot_token": "${SLACK_BOT_TOKEN}", "signing_secret": "${SLACK_SIGNING_SECRET}"}
GITHUB_FROM_ENV = [
    ({"token": "${GITHUB_TOKEN}", "webhook_secret": "${GITHUB_WEBHOOK_SECRET}"},
     ["github.token: environment variable GITHUB_TOKEN",
      "github.webhook_secret: environment variable GITHUB_WEBHOOK_SECRET"]),
    ({"app_id": "${GITHUB_APP_ID}", "private_key": "${GITHUB_PRIVATE_KEY}", "installation_id": 7,
      "webhook_secret": "${GITHUB_WEBHOOK_SECRET}"},
     ["github.app_id: environment variable GITHUB_APP_ID", "github.private_key: environment variable "
      "GITHUB_PRIVATE_KEY", "github.webhook_secret: environment variable GITHUB_WEBHOOK_SECRET"]),
]
UNSET = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "GITHUB_TOKEN", "GITHUB_WEBHOOK_SECRET", "GITHUB_APP_ID",
         "GITHUB_PRIVATE_KEY")


@pytest.fixture
def no_channel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(("github", "missing"), GITHUB_FROM_ENV)
@pytest.mark.usefixtures("no_channel_variables")
def test_status_decide_and_offline_check_need_no_channel_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], github: dict[str, object], missing: list[str]
) -> None:
    path = write_config(tmp_path, [demo()], slack=SLACK_FROM_ENV, github=github)
    for _ in range(2):  # the models judge the first time, the memo answers the second
        code, out, err = cli(capsys, "status", "--config", str(path))
        assert code == EXIT_OK and "no runs yet" in out, err
    code, _, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(path))
    assert code == EXIT_USAGE and "demo-1" in err and "invalid config" not in err
    code, out, err = cli(capsys, "check", "--offline", "--config", str(path))
    assert code == EXIT_OK and "slack (POST /slack/events)" in out, err
    code, _, err = cli(capsys, "migrate", "--config", str(path))  # the store's commands talk to no channel
    assert code == EXIT_OK and "invalid config" not in err, err


@pytest.mark.parametrize(("github", "missing"), GITHUB_FROM_ENV)
@pytest.mark.parametrize("command", [["serve"], ["check"], ["run", "demo"]])
@pytest.mark.usefixtures("no_channel_variables")
def test_serve_run_and_the_online_check_name_every_missing_variable_with_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], github: dict[str, object], missing: list[str],
    command: list[str],
) -> None:
    path = write_config(tmp_path, [demo()], slack=SLACK_FROM_ENV, github=github)
    code, out, err = cli(capsys, *command, "--config", str(path))
    assert code == EXIT_FAILED and out == ""
    lines = err.splitlines()
    assert lines[0] == "loopbot: invalid config:"
    expected = ["slack.bot_token: environment variable SLACK_BOT_TOKEN",
                "slack.signing_secret: environment variable SLACK_SIGNING_SECRET", *missing]
    assert sorted(line.split(" is not set")[0] for line in lines[1:]) == sorted(f"{path}: {key}" for key in expected)


@pytest.mark.usefixtures("no_channel_variables")
def test_a_channel_block_status_does_not_read_is_not_its_concern(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in slack: stops check (which names it), not status: status never talks to Slack."""
    path = write_config(tmp_path, [demo()], slack={"bot_tokn": "xoxb-x", "signing_secret": SIGNING})
    assert cli(capsys, "status", "--config", str(path))[0] == EXIT_OK
    code, _, err = cli(capsys, "check", "--offline", "--config", str(path))
    assert code == EXIT_FAILED and "slack.bot_tokn: unknown key" in err


def test_status_refuses_what_it_reads_as_load_config_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, [demo()], people=[{"name": "alice", "local": "alice"}, {"name": "Alice"}])
    for command in ("status", "check"):
        code, _, err = cli(capsys, command, "--offline" if command == "check" else "--json", "--config", str(path))
        assert code == EXIT_FAILED
        assert err.splitlines()[1:] == [f"{path}: people[1].name: 'Alice' is listed twice"]
