"""Hostile input to ``decide`` / ``run`` / ``status`` / ``check`` (issue #12 "Done when").

``bot.cli.main`` is called in process on a config with two demo loops,
``demo`` and ``other`` (reviewers local [alice]), each with a run paused on
its review. Hypothesis throws hostile review ids, voter names, feedback,
``--set`` values and config files at it. Every call must return an int
(no exception escapes, argparse's exit included), print no traceback, and
write nothing outside ``state_dir``; afterwards ``other``'s review still
takes a vote and the service applies it (the run completes).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.cli import main
from bot.config import load_config
from bot.desk import ReviewDesk
from bot.runner import Runner, utcnow
from bot.service import Service
from bot.store import SqliteStore

from .runtime_support import RecordingChannel, demo, write_config

#: Characters a terminal can hand over: controls, newlines, RTL marks, and bytes that are not UTF-8
#: (surrogateescape turns them into lone surrogates). NUL cannot be in argv.
_ODD = "\x01\x07\x08\t\n\r\x1b\x7f\u202e\u2028\ufeff\udc80\udcff\udce9~/.\\'\"$`;|&*?[]{}%="
TEXT = st.text(alphabet=st.one_of(st.sampled_from(_ODD), st.characters(blacklist_characters="\x00")), max_size=40)
HUGE = st.integers(1, 200_000).map(lambda n: "x" * n)
HOSTILE = st.one_of(TEXT, HUGE, st.sampled_from(["", " ", "-", "--", "-h", "..", "../../etc/passwd", "demo-1\n",
                                                 "DEMO-1 ", "demo-1/../other-1", "demo-01", "demo-1.json", "~"]))
REVIEW_ID = st.one_of(st.just("demo-1"), HOSTILE).filter(lambda s: s.strip().lower() != "other-1")
DECISION = st.sampled_from(["approve", "reject", "retry", "modify", "pause", "lgtm", "no", "APPROVE", "frobnicate"])
VOTER = st.one_of(st.just("alice"), HOSTILE)

DEEP = st.integers(1, 50_000).map(lambda n: "[" * n + "]" * n)
VALUES = st.one_of(
    DEEP, st.sampled_from(["NaN", "-Infinity", "1e999", "-1e999", "null", "{}", '{"":{"":{}}}', '"\\ud800"',
                           "9" * 5000, "1" + "0" * 100_000, '{"a":1,"a":2}', "[1,", "\u0000"]),
    st.integers(1, 300_000).map(lambda n: '"' + "y" * n + '"'), TEXT,
)
KEYS = st.one_of(
    st.sampled_from(["context.x", "context.", "context..x", "context.__class__", "plan.skip", "plan.add",
                     "step.description", "step.metadata.k", "step.output", "until", "", "=", "x" * 5000]),
    TEXT.map(lambda s: "context." + s),
)
ASSIGNMENT = st.one_of(st.tuples(KEYS, VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"), HOSTILE)


def _alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


CONFIGS = st.one_of(
    st.integers(3, 9).map(_alias_bomb).map(str.encode),
    st.integers(10, 100_000).map(lambda n: ("x: " + "[" * n + "]" * n + "\n").encode()),
    st.integers(10, 5_000).map(lambda n: ("a:\n" + "".join("  " * i + "b:\n" for i in range(1, n))).encode()),
    st.binary(max_size=2000),
    st.integers(1, 3_000_000).map(lambda n: b"# " + b"y" * n + b"\nloops: []\n"),
    st.just(b"loops: []\nloops: []\n"),
    st.just(b"state_dir: state\nstate_dir: state\n"),
    st.just(b"loops:\n  - {name: demo, pattern: demo, name: other}\n"),
    st.just(b"\xff\xfe\x00l\x00o\x00o\x00p\x00s\x00"),
    st.just(b"loops: &l [*l]\n"),
    st.just(b"!!python/object/apply:os.system ['echo pwned > pwned']\n"),
    TEXT.map(lambda s: s.encode("utf-8", "surrogateescape")),
)


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("LOOPBOT_CONFIG", raising=False)
    monkeypatch.setenv("LOOPBOT_USER", "alice")
    monkeypatch.chdir(tmp_path)  # a relative path a command wrongly writes to lands where the snapshot sees it
    yield
    _drop_loopbot_handlers()


def _drop_loopbot_handlers() -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_loopbot", False)]:
        root.removeHandler(handler)


def outside_state(root: Path, *, skip: set[Path]) -> dict[str, str]:
    """Every file and directory under ``root`` except ``root/state`` and ``skip``, with a hash of its content."""
    state = root / "state"
    found = {}
    for path in sorted(root.rglob("*")):
        if path == state or state in path.parents or path in skip:
            continue
        found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "/"
    return found


class Cli:
    """``main`` in process, checked: an int back, no traceback, nothing written outside ``state_dir``."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.root = root
        self.capsys = capsys
        self.config = write_config(root, [demo(review={"reviewers": {"local": ["alice"]}}),
                                          demo("other", review={"reviewers": {"local": ["alice"]}})])
        self.hostile = root / "hostile.yaml"
        self.calls = 0

    def __call__(self, *args: str, config: Path | None = None) -> tuple[int, str, str]:
        before = outside_state(self.root, skip={self.hostile})
        try:
            code = main([f"--config={config or self.config}", *args])
        except BaseException as err:  # noqa: BLE001 - the point: nothing may escape main
            pytest.fail(f"loopbot {args!r} raised {type(err).__name__}: {err!r}"[:2000])
        finally:  # `run` logs to the stderr of its call; pytest swaps that stream between phases
            _drop_loopbot_handlers()
        out, err = self.capsys.readouterr()
        self.calls += 1
        assert isinstance(code, int), (args, code)
        assert "Traceback" not in err and "Traceback" not in out, (args, err[-3000:])
        after = outside_state(self.root, skip={self.hostile})
        assert after == before, f"loopbot {args!r}"[:500] + f" wrote outside state_dir: {set(after) ^ set(before)}"
        return code, out, err


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    runner = Cli(tmp_path, capsys)
    for loop in ("demo", "other"):
        code, out, _ = runner("run", loop)
        assert code == 0 and "waiting" in out, out
    return runner


FUZZ = settings(max_examples=100, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def other_still_applies(cli: Cli) -> None:
    """``other-1`` takes alice's vote and the service applies it: its run completes."""
    code, out, err = cli("decide", "--as=alice", "--", "other-1", "approve")
    assert code == 0, err
    config = load_config(cli.config, environ={})
    store = SqliteStore(config.state_dir)
    runner = Runner(config, store, ReviewDesk(store, {"local": RecordingChannel()}, clock=utcnow, inline=True))
    Service(store, runner).tick()  # applies every decided review: other-1, and demo-1 if the fuzz decided it
    assert runner.join(20)
    run = store.get_review("other-1").run_id
    assert store.get_run(run).status == "completed", store.get_run(run)
    code, out, _ = cli("status", "--json")
    assert code == 0 and '"status": "completed"' in out


def test_hostile_votes_then_the_other_review_still_applies(cli: Cli) -> None:
    @FUZZ
    @given(review=REVIEW_ID, decision=DECISION, voter=VOTER, feedback=st.one_of(st.just(""), HOSTILE),
           assignments=st.lists(ASSIGNMENT, max_size=3), duration=st.one_of(st.none(), HOSTILE, st.just("2h")))
    def vote(review: str, decision: str, voter: str, feedback: str, assignments: list[str],
             duration: str | None) -> None:
        options = [f"--as={voter}", f"--feedback={feedback}", *(f"--set={a}" for a in assignments)]
        positional = [review, decision, *([duration] if duration is not None else [])]
        code, _, _ = cli("decide", *options, "--", *positional)
        assert code in (0, 1, 2)

    vote()
    other_still_applies(cli)


def test_hostile_run_status_check_then_the_other_review_still_applies(cli: Cli) -> None:
    @settings(FUZZ, max_examples=40)
    @given(loop=st.one_of(st.sampled_from(["demo", "other", "Demo", "demo "]), HOSTILE), as_json=st.booleans(),
           also=st.sampled_from(["status", "check", "none"]))
    def commands(loop: str, as_json: bool, also: str) -> None:
        code, _, _ = cli("run", "--", loop)
        assert code in (1, 2), "a loop with an active run, or an unknown loop: nothing starts"
        if also == "status":
            code, _, _ = cli("status", *(["--json"] if as_json else []))
        elif also == "check":
            code, _, _ = cli("check", "--offline")
        assert code in (0, 1, 2)

    commands()
    other_still_applies(cli)


def test_hostile_config_files_then_the_other_review_still_applies(cli: Cli) -> None:
    @settings(FUZZ, max_examples=40)
    @given(content=CONFIGS, command=st.sampled_from(["status", "check", "decide", "run"]))
    def config_file(content: bytes, command: str) -> None:
        cli.hostile.write_bytes(content)
        args = {"status": ["status"], "check": ["check", "--offline"],
                "decide": ["decide", "--", "demo-1", "approve"], "run": ["run", "--", "other"]}[command]
        code, _, err = cli(*args, config=cli.hostile)
        assert code in (0, 1, 2), err
        assert not (cli.root / "pwned").exists()

    config_file()
    other_still_applies(cli)
