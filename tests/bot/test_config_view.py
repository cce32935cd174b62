"""bot.config_view: what status and decide read, vouched for without pydantic whenever it can be.

The check may decline a valid config (the models then judge it), but must
never vouch for one the models refuse, and what it builds must equal
``ConfigView.of(load_config(...))``. Every invalid config of test_config.py
is also read through ``load_view`` there (``errors_of``), for the same errors.
"""

from __future__ import annotations

import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, SecretStr

from bot.config import BotConfig, ConfigError, load_config, validate_config
from bot.config_blocks import CheckpointBlock, GitHubConfig, SlackConfig
from bot.config_file import ConfigData, read_config
from bot.config_view import _CONFIG, _SECRET_KEYS, ConfigView, _Block, _List, _Optional, _vouch, load_view

ROOT = Path(__file__).resolve().parents[2]
ENV = {"USER": "alice", "SLACK_BOT_TOKEN": "xoxb-very-secret-1", "GITHUB_TOKEN": "ghp_very_secret_2", "PORT": "9000"}


def seen(view: ConfigView) -> tuple[Any, ...]:
    """What status and decide use of a view (people as names and accounts: the two paths hold other classes)."""
    people = [(person.name, person.accounts()) for person in view.people]
    return view.state_dir, people, sorted(view.secrets), view.store


def vouched(path: Path, environ: dict[str, str]) -> ConfigView | None:
    return _vouch(read_config(path, environ).data, path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


PLAIN = {
    "empty": "",
    "bench": "state_dir: ./state\nloops:\n  - {name: demo, pattern: demo, review: {reviewers: {local: [alice]}}}\n",
    "every key": """
        state_dir: /tmp/loopbot-state
        timezone: Europe/Berlin
        server: {host: 0.0.0.0}
        slack: {bot_token: "${SLACK_BOT_TOKEN}", app_token: xapp-1-secret, api_base_url: "http://h/", command: /ops}
        github: {token: "${GITHUB_TOKEN}", webhook_secret: hook-secret, base_url: "http://h", poll_interval: 90s}
        scheduler: {misfire_grace_time: null, poll_interval: 1}
        store: null
        people:
          - {name: alice, local: alice, slack: U0AAA, github: alice}
          - {name: bob}
        loops:
          - name: triage
            pattern: daily-triage
            schedule: {cron: "*/15 9-17 * jan-jun 1-5", timezone: America/New_York}
            options: {repository: octo/ops, nested: {any: [thing]}}
            checkpoint: {preset: production, trigger_every_n_iterations: 3}
            review:
              post_to: [{slack: {channel: C0123ABC}}, {github: {repository: octo/ops, issue: 42}}, {local: {}}]
              reviewers: {people: [Alice], slack_groups: [S0BBB], github_teams: [octo/t], github_min_permission: write}
              approvals_required: "2"
              timeout:
                remind_after: 2h
                escalate_after: 3600
                escalate_to: [{github: {repository: octo/ops}}]
                decide_after: 1.5
                default: approve
                allow_default_approve: true
          - {name: sweep, factory: "mypkg.loops:build", schedule: {interval: 30m}, run_on_start: true, overlap: allow}
        """,
    "github app": """
        github: {app_id: "12345", private_key: "-----BEGIN KEY-----", installation_id: 7}
        loops: [{name: a, pattern: demo, checkpoint: {}}]
        """,
}


@pytest.mark.parametrize("text", PLAIN.values(), ids=PLAIN.keys())
def test_a_plain_config_is_vouched_for_and_read_as_the_models_read_it(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    view = vouched(path, ENV)
    assert view is not None, "the check declined a plain config: status would load pydantic for it"
    assert seen(view) == seen(ConfigView.of(load_config(path, ENV))) == seen(load_view(path, ENV))


def test_the_example_config_is_vouched_for() -> None:
    """What `loopbot init` writes: a cron line, a checkpoint preset, the port from ${PORT:-8000}."""
    path = ROOT / "config.example.yaml"
    view = vouched(path, ENV)
    assert view is not None and seen(view) == seen(ConfigView.of(load_config(path, ENV)))


DECLINED = {
    "a value the models coerce": "loops: [{name: a, pattern: demo, run_on_start: 'true'}]",
    "a float port": "server: {port: 8000.0}",
    "a store block": "store: {url: 'postgresql://u:pw-secret@h/db', schema: bots}",
}


@pytest.mark.parametrize("text", DECLINED.values(), ids=DECLINED.keys())
def test_what_the_check_declines_the_models_read(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert vouched(path, ENV) is None
    assert seen(load_view(path, ENV)) == seen(ConfigView.of(load_config(path, ENV)))


def test_the_store_block_reaches_the_view_with_its_secret(tmp_path: Path) -> None:
    view = load_view(write(tmp_path, DECLINED["a store block"]), ENV)
    assert view.store is not None and view.store.schema_name == "bots"
    assert "postgresql://u:pw-secret@h/db" in view.secret_values()


#: Invalid configs close to plain ones (test_config.py's invalid configs are compared in its ``errors_of``).
INVALID = {
    "a nameless person": "people: [{name: ''}]",
    "a repository with a newline": "github: {token: t}\nloops: [{name: a, pattern: demo, review: {post_to: "
                                   "[{github: {repository: \"octo/ops\\n\"}}]}}]",
    "a repository without an owner": "github: {token: t}\nloops: [{name: a, pattern: demo, review: {post_to: "
                                     "[{github: {repository: ops}}]}}]",
    "a port past 65535": "server: {port: '65536'}",
    "a null host": "server: {host: null}",
    "a cron day out of range": "loops: [{name: a, pattern: demo, schedule: {cron: '0 0 0 * *'}}]",
    "a step over the span": "loops: [{name: a, pattern: demo, schedule: {cron: '*/60 * * * *'}}]",
    "a null schedule timezone with an interval": "loops: [{name: a, pattern: demo, schedule: {interval: 1h, "
                                                 "timezone: null}}]",
    "a zero approvals count": "loops: [{name: a, pattern: demo, review: {approvals_required: '0'}}]",
}


@pytest.mark.parametrize("text", INVALID.values(), ids=INVALID.keys())
def test_an_invalid_config_is_not_vouched_for_and_fails_as_load_config_does(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert vouched(path, ENV) is None
    with pytest.raises(ConfigError) as viewed:
        load_view(path, ENV)
    with pytest.raises(ConfigError) as loaded:
        load_config(path, ENV)
    assert viewed.value.errors == loaded.value.errors


def test_an_invalid_config_names_its_key_as_load_config_does(tmp_path: Path) -> None:
    path = write(tmp_path, "loops: [{name: a, pattern: demo, schedule: {cron: '61 * * * *'}}]")
    with pytest.raises(ConfigError) as viewed:
        load_view(path, ENV)
    with pytest.raises(ConfigError) as loaded:
        load_config(path, ENV)
    assert viewed.value.errors == loaded.value.errors
    assert viewed.value.errors[0].startswith(f"{path}: loops[0].schedule.cron: invalid cron expression '61 * * * *'")


# -- the check against the models, key by key ----------------------------------------------------------


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, in a list or with None), None for a plain value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        return next(filter(None, map(_model_in, typing.get_args(annotation))), None)
    return None


def _block_in(check: Any) -> _Block | None:
    while isinstance(check, _Optional | _List):
        check = check.check
    return check if isinstance(check, _Block) else None


def _holds_to_model(block: _Block, model: type[BaseModel], where: str) -> None:
    keys = {field.alias or name for name, field in model.model_fields.items()}
    assert set(block.fields) == keys, f"{where}: the check knows {sorted(block.fields)}, the model {sorted(keys)}"
    required = {field.alias or name for name, field in model.model_fields.items() if field.is_required()}
    assert set(block.required) == required, f"{where}: required keys differ from {model.__name__}'s"
    for name, field in model.model_fields.items():
        inner = _model_in(field.annotation)
        if inner is None or inner is CheckpointBlock or name == "store":
            continue  # a leaf; the checkpoint block is checked by its rule, a store block is left to the models
        nested = _block_in(block.fields[field.alias or name])
        assert nested is not None, f"{where}.{name}: the check does not look into {inner.__name__}"
        _holds_to_model(nested, inner, f"{where}.{name}")


def test_every_block_of_the_check_has_its_models_keys() -> None:
    """A key added to a model must be added to the check too, or every config using it is slow to read."""
    _holds_to_model(_CONFIG, BotConfig, "(top level)")


@pytest.mark.parametrize("model", [SlackConfig, GitHubConfig])
def test_the_secret_keys_are_the_secret_fields(model: type[BaseModel]) -> None:
    secret = [name for name, field in model.model_fields.items() if SecretStr in (field.annotation,
                                                                                   *typing.get_args(field.annotation))]
    assert list(_SECRET_KEYS[model.__name__.removesuffix("Config").lower()]) == secret


#: Values each key may be given, valid and not, shared by keys of the same name in different blocks.
_VALUES: dict[str, list[Any]] = {
    "state_dir": ["./state", "/srv/bot", "", 5],
    "timezone": ["UTC", "Europe/Berlin", "Mars/Olympus", None],
    "host": ["0.0.0.0", None, 1],
    "port": [8000, "8000", "080", 0, 65536, -1, "80a", 8000.0, True, None],
    "name": ["demo", "daily-triage", "Alice", "Bad Name", "", 5],
    "pattern": ["demo", None, 3],
    "factory": ["pkg.mod:build", "not a factory", None],
    "cron": ["0 9 * * 1-5", "0 9 * * mon-fri", "*/15 * * * *", "61 * * * *", "0 9 * *", "0 9 L * *", "5/70 * * * *",
             "0 0 1 jan-mar sun", "0 0 * * fri-mon", None, 9],
    "interval": ["1h", 60, 0, "400d", "soon", None, True],
    "run_on_start": [True, False, "true", 1, None],
    "overlap": ["skip", "allow", "never"],
    "options": [{}, {"items": 3}, {1: 2}, [], None],
    "checkpoint": [{"preset": "manual_only"}, {"enabled": False}, {"trigger_every_n_iterations": 0}, {"nope": 1},
                   {"preset": "bogus"}, {}, None, "production"],
    "approvals_required": [1, 2, "2", 0, True, None],
    "default": ["reject", "pause", "approve", "maybe"],
    "allow_default_approve": [True, False, "yes"],
    "remind_after": ["1h", 30, -5, "400d", "bad", None],
    "people": [["alice"], ["Bob"], [], None, "alice", [1]],
    "local": [["alice"], "alice", "", None, [], {}],
    "slack": ["U0AAA", None, ["U1"]],
    "github": ["alice", None],
    "slack_users": [["U0AAA"], None, "U0AAA"],
    "github_min_permission": ["write", "owner", None],
    "channel": ["C0123", 5, None],
    "repository": ["octo/ops", "octo", "octo/ops\n", "ü/ö", None],
    "issue": [1, 0, "3", None],
    "bot_token": ["xoxb-secret", "", None],
    "signing_secret": ["signing", None],
    "app_token": ["xapp-secret", None],
    "token": ["ghp_secret", None],
    "app_id": [1, "12", "x", None],
    "private_key": ["key", None],
    "installation_id": [2, None],
    "webhook_secret": ["hook", None],
    "poll_interval": [0.5, "1m", 0, -1, float("inf"), float("nan"), None],
    "misfire_grace_time": [3600, 0, "10", None],
    "api_base_url": ["https://slack.com/api/", 1],
    "command": ["/loopbot", None],
    "base_url": ["https://api.github.com", None],
    "url": ["postgresql://h/db", "mysql://h/db"],
    "schema": ["loopbot", "Bad-Schema"],
    "lease_seconds": [60, 0],
    "election_interval": [2, 100],
}
_VALUES["escalate_after"] = _VALUES["decide_after"] = _VALUES["remind_after"]
_VALUES["slack_groups"] = _VALUES["github_users"] = _VALUES["github_teams"] = _VALUES["slack_users"]
_ANYTHING = st.sampled_from([None, "x", 1, [], {}])


def _block_data(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Mappings of some of ``model``'s keys (now and then a typo), each given a value of its own or a block."""
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        inner = _model_in(field.annotation)
        if inner is not None and inner is not CheckpointBlock:
            block = st.deferred(lambda inner=inner: _block_data(inner))
            listed = typing.get_origin(field.annotation) is list
            blocks = st.lists(block, max_size=2) if listed else block
            strategies[key] = st.one_of(blocks, blocks, blocks, _ANYTHING)  # mostly a block, sometimes not
        elif key in _VALUES:  # the first value is a valid one: given half of the time, or few configs would be valid
            strategies[key] = st.one_of(st.just(_VALUES[key][0]), st.sampled_from(_VALUES[key]))
        else:
            strategies[key] = _ANYTHING
    required = {field.alias or name for name, field in model.model_fields.items() if field.is_required()}
    keys = st.lists(st.sampled_from(sorted(strategies)), unique=True) if strategies else st.just([])
    typo = st.sampled_from([{}] * 9 + [{"typo": _ANYTHING}])  # one block in ten has a key no model knows
    return st.tuples(keys, typo).flatmap(  # the required keys always: a block without them is plainly refused
        lambda chosen: st.fixed_dictionaries({key: strategies[key] for key in {*required, *chosen[0]}} | chosen[1])
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_block_data(BotConfig))
def test_the_check_never_vouches_for_a_config_the_models_refuse(data: dict[str, Any]) -> None:
    path = Path("/etc/loopbot/config.yaml")
    view = _vouch(data, path)
    try:
        config = validate_config(ConfigData(data, set(), {}), path, {})
    except ConfigError as err:
        assert view is None, f"vouched for an invalid config: {err}"
        return
    if view is not None:
        assert seen(view) == seen(ConfigView.of(config))
