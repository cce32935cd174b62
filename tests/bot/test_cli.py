"""The loopbot command in-process: exit codes, messages, nothing changed on refusal, no secrets."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from bot.store import FileStore

from .runtime_support import demo, write_config

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


def test_check_prints_a_summary_without_secrets(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "check", "--config", str(config))
    assert code == EXIT_OK
    assert "OK" in out and "demo: pattern demo" in out and "nightly" in out
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
    assert cli(capsys, "check")[0] == EXIT_OK


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
    code, out, _ = cli(capsys, "run", "demo", "--config", str(config))
    assert code == EXIT_OK and "already has an active run" in out


def test_status_json_shape_and_no_secrets(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    store = FileStore(config.parent / "state")
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


def test_decide_records_a_vote_and_says_who_applies_it(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, err = cli(capsys, "decide", "DEMO-1", "lgtm", "--config", str(config))
    assert code == EXIT_OK, err
    assert "decided: approve by local:alice" in out and "no server is running" in out
    review = FileStore(config.parent / "state").get_review("demo-1")
    assert review.status == "decided" and review.votes[0].voter == "local:alice"


def test_decide_votes_as_user_when_loopbot_user_is_unset(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOPBOT_USER")
    monkeypatch.setenv("USER", "bob")
    cli(capsys, "run", "demo", "--config", str(config))
    code, out, err = cli(capsys, "decide", "demo-1", "approve", "--config", str(config))
    assert code == EXIT_OK, err
    assert FileStore(config.parent / "state").get_review("demo-1").votes[0].voter == "local:bob"


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
    assert FileStore(tmp_path / "state").get_review("demo-1").votes[0].voter == "local:ops"


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
    assert FileStore(config.parent / "state").get_review("demo-1").votes == []


def test_decide_modify_with_set_values(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    code, _, err = cli(capsys, "decide", "demo-1", "modify", "--set", "context.items=2", "--set", "note=ok",
                       "--as", "bob", "--config", str(config))
    assert code == EXIT_OK, err
    outcome = FileStore(config.parent / "state").get_review("demo-1").outcome
    assert outcome is not None and outcome.modifications == {"context": {"items": 2}, "note": "ok"}
    assert outcome.decided_by == ["local:bob"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["demo-9", "approve"], EXIT_USAGE, "no review 'demo-9' - did you mean \"demo-1\""),
        (["demo-1", "aprove"], EXIT_USAGE, 'did you mean "approve"'),
        (["demo-1", "modify", "--set", "novalue"], EXIT_USAGE, "key=value"),
        (["demo-1", "approve", "--as", "mallory"], EXIT_FAILED, "mallory is not a reviewer"),
        (["demo-1", "reject"], EXIT_FAILED, "a reject needs a reason"),
    ],
)
def test_refusals_exit_non_zero_and_change_nothing(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, message: str
) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    state = config.parent / "state"
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    got, out, err = cli(capsys, "decide", *args, "--config", str(config))
    assert got == code
    assert message in err
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == before


def test_a_late_vote_is_told_who_decided(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "run", "demo", "--config", str(config))
    assert cli(capsys, "decide", "demo-1", "approve", "--config", str(config))[0] == EXIT_OK
    code, _, err = cli(capsys, "decide", "demo-1", "approve", "--as", "bob", "--config", str(config))
    assert code == EXIT_FAILED and "already decided by local:alice" in err


def test_serve_on_a_taken_port_fails_cleanly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from bot.store import ServeLock

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        path = write_config(tmp_path, [demo()], server={"port": taken.getsockname()[1]})
        code, _, err = cli(capsys, "serve", "--config", str(path))
    finally:
        taken.close()
    assert code == EXIT_FAILED and "cannot serve on 127.0.0.1:" in err
    assert ServeLock.holder(tmp_path / "state") is None  # the lock was released
