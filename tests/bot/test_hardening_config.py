"""load_config refuses files that are not configs before they cost time or memory (issue #12 item 9),
and commands that never talk to a channel load without its secrets (issue #13 item 2)."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from bot.config import MAX_CONFIG_BYTES, ConfigError, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def refusal(path: Path, environ: dict[str, str] | None = None) -> str:
    warm = path.with_name("warm.yaml")  # the models build their validators on first use: not what is timed here
    warm.write_text(f"state_dir: {path.parent / 'state'}\n", encoding="utf-8")
    load_config(warm, {})
    started = time.process_time()  # CPU spent, not wall time: other processes on a busy machine do not count
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ or {})
    assert time.process_time() - started < 1.0, "a hostile config must be refused fast"
    (line,) = caught.value.errors
    assert line.startswith(f"{path}: ")
    return line


def billion_laughs() -> str:
    """The classic: nine levels of nine aliases, 9**9 = 387 million strings once expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_fast_naming_the_file(tmp_path: Path) -> None:
    text = billion_laughs()
    assert len(text) < 500
    path = tmp_path / "bomb.yaml"
    path.write_text(text, encoding="utf-8")
    assert "aliases" in refusal(path)


def test_an_alias_bomb_inside_a_loops_options_is_refused_too(tmp_path: Path) -> None:
    bomb = billion_laughs().replace("\n", "\n    ")
    path = write(tmp_path, "loops:\n  - name: demo\n    pattern: demo\n    options:\n    " + bomb)
    assert "aliases" in refusal(path)


def test_ordinary_aliases_still_work(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "loops:\n"
        "  - {name: a, pattern: demo, review: &review {approvals_required: 1}}\n"
        "  - {name: b, pattern: demo, review: *review}\n",
        encoding="utf-8",
    )
    config = load_config(path, {})
    assert [loop.review.approvals_required for loop in config.loops] == [1, 1]


@pytest.mark.parametrize("depth", [60, 5_000, 100_000])
def test_deep_nesting_is_refused_fast(tmp_path: Path, depth: int) -> None:
    path = write(tmp_path, "loops: " + "[" * depth)
    assert "nested more than 50 levels deep" in refusal(path)


def test_a_file_over_a_mebibyte_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1), encoding="utf-8")
    assert "larger than 1 MiB" in refusal(path)


def test_a_file_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"timezone: UTC\nstate_dir: caf\xe9\n")
    assert "line 2: not UTF-8" in refusal(path)


SLACK_AND_GITHUB = """
    slack:
      bot_token: ${SLACK_BOT_TOKEN}
      signing_secret: ${SLACK_SIGNING_SECRET}
    github:
      app_id: ${GITHUB_APP_ID}
      private_key: ${GITHUB_PRIVATE_KEY}
      installation_id: ${GITHUB_INSTALLATION_ID}
      webhook_secret: ${GITHUB_WEBHOOK_SECRET}
    loops:
      - name: demo
        pattern: demo
        review:
          post_to: [{slack: {channel: C0123ABC}}]
          reviewers: {local: [alice]}
"""


def test_unset_channel_secrets_are_errors_by_default(tmp_path: Path) -> None:
    path = write(tmp_path, SLACK_AND_GITHUB)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert any("SLACK_BOT_TOKEN is not set" in line for line in caught.value.errors)
    assert any("GITHUB_APP_ID is not set" in line for line in caught.value.errors)


def test_need_secrets_false_loads_without_channel_secrets(tmp_path: Path) -> None:
    path = write(tmp_path, SLACK_AND_GITHUB)
    config = load_config(path, {"SLACK_SIGNING_SECRET": "signing-very-secret"}, need_secrets=False)
    assert config.slack is not None and config.github is not None
    assert config.slack.bot_token.get_secret_value() == ""
    assert config.github.app_id is not None  # the int field got a stand-in it accepts
    assert list(config.secret_values()) == ["signing-very-secret"]  # set secrets are still redacted
    assert config.loop("demo") is not None


def test_need_secrets_false_still_checks_everything_else(tmp_path: Path) -> None:
    text = SLACK_AND_GITHUB.replace("pattern: demo", "pattern: demo\n        schedule: {interval: \"${EVERY}\"}")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, {}, need_secrets=False)
    assert [line.split(": ", 1)[1] for line in caught.value.errors] == [
        "loops[0].schedule.interval: environment variable EVERY is not set; set it or write ${EVERY:-default}"
    ]
    typo = write(tmp_path, SLACK_AND_GITHUB.replace("bot_token:", "bot_tokn:"))
    with pytest.raises(ConfigError, match="slack.bot_tokn: unknown key"):
        load_config(typo, {}, need_secrets=False)
