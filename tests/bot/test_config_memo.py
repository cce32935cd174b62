"""bot.config_memo: status and decide read CoreConfig's verdict, remembered per content, never a rule of their own."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from bot.config import ConfigError, CoreConfig, load_config
from bot.config_memo import ConfigView, load_view, memo_dir
from bot.config_file import CHANNEL_BLOCKS

TOKEN = "xoxb-very-secret-1"
SIGNING = "signing-very-secret-2"
PEOPLE = """
state_dir: ./state
people:
  - {name: alice, local: alice, slack: "${ALICE_SLACK}"}
  - {name: bob, github: bob}
slack: {bot_token: "${SLACK_BOT_TOKEN}", signing_secret: SIGNING}
loops:
  - {name: demo, pattern: demo, review: {reviewers: {people: [alice, bob]}}}
""".replace("SIGNING", SIGNING)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "cache"), "SLACK_BOT_TOKEN": TOKEN, "ALICE_SLACK": "U0AAA"}


def seen(view: ConfigView) -> tuple[object, ...]:
    return view.state_dir, [(p.name, p.accounts()) for p in view.people], sorted(view.secret_values()), view.store


def remembered(env: dict[str, str]) -> list[Path]:
    folder = memo_dir(env)
    assert folder is not None
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def test_the_keys_judged_are_the_models_fields(tmp_path: Path, env: dict[str, str]) -> None:
    load_view(write(tmp_path, PEOPLE), env)
    folder = memo_dir(env)
    assert folder is not None
    listed, = [json.loads(file.read_text()) for file in folder.glob("*.keys")]
    assert listed == [key for key in CoreConfig.model_fields if key not in CHANNEL_BLOCKS]
    assert {"state_dir", "loops", "people", "store"} <= set(listed) and not {"slack", "github"} & set(listed)


def test_a_remembered_verdict_reads_back_as_the_models_gave_it(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, PEOPLE)
    judged = load_view(path, env)
    assert len(remembered(env)) == 1
    again = load_view(path, env)
    config = load_config(path, env)
    assert seen(judged) == seen(again) == (
        config.state_dir, [(p.name, p.accounts()) for p in config.people], sorted(config.secret_values()), None
    )
    assert seen(again)[1] == [("alice", ["local:alice", "slack:U0AAA"]), ("bob", ["github:bob"])]
    assert sorted(again.secret_values()) == sorted([TOKEN, SIGNING])


def test_the_memo_holds_no_secret(tmp_path: Path, env: dict[str, str]) -> None:
    load_view(write(tmp_path, PEOPLE), env)
    text = "".join(file.read_text() for file in remembered(env))
    assert "alice" in text and TOKEN not in text and SIGNING not in text


def test_what_the_environment_gives_the_keys_is_judged_anew(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, PEOPLE)
    assert load_view(path, env).people[0].accounts() == ["local:alice", "slack:U0AAA"]
    assert load_view(path, {**env, "ALICE_SLACK": "U0BBB"}).people[0].accounts() == ["local:alice", "slack:U0BBB"]
    write(tmp_path, PEOPLE.replace('slack: "${ALICE_SLACK}"', "github: bob"))
    with pytest.raises(ConfigError, match=r"people\[1\]: github:bob already belongs to 'alice'"):
        load_view(path, env)
    assert len(remembered(env)) == 2  # an invalid config is never remembered


def test_a_store_block_is_judged_every_time_and_never_remembered(tmp_path: Path, env: dict[str, str]) -> None:
    url = "postgresql://loopbot:pw-very-secret@db:5432/loopbot"
    path = write(tmp_path, f"store: {{url: '{url}', schema: ops}}\n")
    view = load_view(path, env)
    assert view.store is not None and view.store.schema_name == "ops" and url in list(view.secret_values())
    assert remembered(env) == []


@pytest.mark.parametrize("entry", ["{not json", "[]", '{"state_dir": 5, "people": [], "secret_keys": {}}',
                                   '{"state_dir": "./s", "people": [["alice", [1]]], "secret_keys": {}}',
                                   '{"state_dir": "./s", "people": [["alice", "local:x"]], "secret_keys": {}}',
                                   '{"state_dir": "./s", "people": [], "secret_keys": {"slack": [3]}}'])
def test_an_entry_that_is_not_one_is_judged_again_and_replaced(
    tmp_path: Path, env: dict[str, str], entry: str
) -> None:
    path = write(tmp_path, PEOPLE)
    expected = seen(load_view(path, env))
    file, = remembered(env)
    file.write_text(entry)
    assert seen(load_view(path, env)) == expected
    assert file.read_text() != entry


def test_without_a_writable_memo_the_models_judge_every_time(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "cache").write_text("a file where the folder would go")
    path = write(tmp_path, PEOPLE)
    assert seen(load_view(path, env)) == seen(load_view(path, env))
    assert seen(load_view(path, env))[1][0] == ("alice", ["local:alice", "slack:U0AAA"])
    assert memo_dir({}) is None and memo_dir({"HOME": "/home/a"}) == Path("/home/a/.cache/loopbot/config")


def test_one_verdict_serves_two_folders_each_with_its_own_state_dir(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = load_view(write(tmp_path / "a", PEOPLE), env)
    second = load_view(write(tmp_path / "b", PEOPLE), env)
    assert len(remembered(env)) == 1
    assert (first.state_dir, second.state_dir) == (tmp_path / "a" / "state", tmp_path / "b" / "state")


def test_a_keys_list_that_is_not_one_is_written_again(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, PEOPLE)
    expected = seen(load_view(path, env))
    folder = memo_dir(env)
    assert folder is not None
    keys, = folder.glob("*.keys")
    keys.write_text('["state_dir", 5]')
    assert seen(load_view(path, env)) == expected
    assert json.loads(keys.read_text()) == [key for key in CoreConfig.model_fields if key not in CHANNEL_BLOCKS]
