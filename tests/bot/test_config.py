"""load_config: every key, env substitution, errors that name file and key path, no leaked secrets."""

from __future__ import annotations

import json
import re
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import BotConfig, ConfigError, load_config
from bot.config_file import CHANNEL_BLOCKS, channel_stand_in, read_config
from bot.config_memo import load_view
from bot.review_records import Reviewers

ROOT = Path(__file__).resolve().parents[2]
SECRETS = {
    "SLACK_BOT_TOKEN": "xoxb-very-secret-1",
    "SLACK_SIGNING_SECRET": "signing-very-secret-2",
    "GITHUB_TOKEN": "ghp_very_secret_3",
    "GITHUB_WEBHOOK_SECRET": "hook-very-secret-4",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def view_errors(path: Path, environ: dict[str, str]) -> list[str]:
    """What status and decide (``load_view``) say of ``path``: no lines when they can read it."""
    try:
        load_view(path, {**environ, "XDG_CACHE_HOME": str(path.parent / "memo")})
    except ConfigError as err:
        return err.errors
    return []


def about_channels(line: str) -> bool:
    """Whether an error line is one only BotConfig gives: a channel block's, an unknown top-level key, or a
    review target whose channel block is missing."""
    top = re.split(r"[.\[:]", line, maxsplit=1)[0]
    unknown_top_key = re.match(r"[^.\[:]+: unknown key", line) is not None
    return top in CHANNEL_BLOCKS or unknown_top_key or re.search(r"\.(slack|github): needs the top-l", line) is not None


def errors_of(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> list[str]:
    """The errors of an invalid config; status and decide (``load_view``) refuse it with the same lines, but for
    those about the channel blocks they never read (all of them when the file itself cannot be read)."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path, environ or {})
    try:
        read_config(path, environ or {}, unset=channel_stand_in)
    except ConfigError as err:
        core = err.errors
    else:
        core = [line for line in info.value.errors if not about_channels(line[len(str(path)) + 2 :])]
    assert view_errors(path, environ or {}) == core
    assert all(line.startswith(f"{path}: ") for line in info.value.errors), info.value.errors
    return [line[len(str(path)) + 2 :] for line in info.value.errors]


def one_error(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> str:
    errors = errors_of(tmp_path, text, environ)
    assert len(errors) == 1, errors
    return errors[0]


FULL = """
state_dir: /tmp/loopbot-state
timezone: Europe/Berlin
server: {host: 0.0.0.0, port: 9000}
slack:
  bot_token: ${SLACK_BOT_TOKEN}
  signing_secret: ${SLACK_SIGNING_SECRET}
  api_base_url: http://127.0.0.1:1/api/
  command: /ops
github:
  token: ${GITHUB_TOKEN}
  webhook_secret: ${GITHUB_WEBHOOK_SECRET}
  base_url: http://127.0.0.1:2
  poll_interval: 90s
scheduler: {misfire_grace_time: 60, poll_interval: 0.1}
loops:
  - name: triage
    pattern: daily-triage
    schedule: {cron: "0 9 * * mon-fri", timezone: America/New_York}
    options: {repository: octo/ops}
    checkpoint: {preset: production}
    review:
      post_to:
        - slack: {channel: C0123ABC}
        - github: {repository: octo/ops, issue: 42}
      reviewers:
        slack_users: [U0AAA]
        slack_groups: [S0BBB]
        github_users: [alice]
        github_teams: [octo/ops-team]
        github_min_permission: write
        local: [alice]
      approvals_required: 2
      timeout:
        remind_after: 2h
        escalate_after: 8h
        escalate_to: [{slack: {channel: C0PAGER}}]
        decide_after: 24h
        default: pause
  - name: sweep
    factory: mypkg.loops:build
    schedule: {interval: 30m}
    run_on_start: true
    overlap: allow
    checkpoint: {trigger_on_failure: true, trigger_every_n_iterations: 3}
"""


def test_every_key_of_the_contract_loads(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL), SECRETS)
    assert config.state_dir == Path("/tmp/loopbot-state") and config.timezone == "Europe/Berlin"
    assert (config.server.host, config.server.port) == ("0.0.0.0", 9000)
    assert config.slack is not None and config.slack.bot_token.get_secret_value() == SECRETS["SLACK_BOT_TOKEN"]
    assert config.slack.command == "/ops" and config.slack.app_token is None
    assert config.github is not None and config.github.poll_interval == timedelta(seconds=90)
    assert (config.scheduler.misfire_grace_time, config.scheduler.poll_interval) == (60, 0.1)
    triage, sweep = config.loops
    assert triage.schedule is not None and triage.schedule.timezone == "America/New_York"
    assert triage.options == {"repository": "octo/ops"} and triage.overlap == "skip" and not triage.run_on_start
    assert sweep.factory == "mypkg.loops:build" and sweep.run_on_start and sweep.overlap == "allow"
    assert sweep.schedule is not None and sweep.schedule.interval == timedelta(minutes=30)
    assert config.loop("sweep") is sweep and config.loop("nope") is None

    policy = triage.review.to_policy()
    assert policy.approvals_required == 2 and policy.default == "pause"
    assert (policy.remind_after, policy.escalate_after, policy.decide_after) == (
        timedelta(hours=2),
        timedelta(hours=8),
        timedelta(hours=24),
    )
    assert policy.escalate_to == [{"slack": {"channel": "C0PAGER"}}]
    assert policy.reviewers == Reviewers(
        local=["alice"],
        slack_users=["U0AAA"],
        slack_groups=["S0BBB"],
        github_users=["alice"],
        github_teams=["octo/ops-team"],
        github_min_permission="write",
    )
    assert sweep.review.to_policy().reviewers.anyone


def test_checkpoint_blocks_become_checkpoint_configs(tmp_path: Path) -> None:
    triage, sweep = load_config(write(tmp_path, FULL), SECRETS).loops
    assert triage.checkpoint is not None and sweep.checkpoint is not None
    production = triage.checkpoint.to_checkpoint_config()
    assert production.trigger_on_major_failure and not production.trigger_on_failure
    fields = sweep.checkpoint.to_checkpoint_config()
    assert fields.trigger_on_failure and fields.trigger_every_n_iterations == 3


def test_example_loads_with_an_empty_environment() -> None:
    config = load_config(ROOT / "config.example.yaml", {})
    assert config.slack is None and config.github is None
    assert config.server.port == 8000 and config.state_dir == ROOT / "state"
    demo, triage = config.loops  # the daily triage is there, inactive until GITHUB_TOKEN and a repository
    assert (demo.name, demo.pattern, demo.run_on_start) == ("demo", "demo", True)
    assert (triage.pattern, triage.run_on_start) == ("daily-triage", False)
    policy = demo.review.to_policy()
    assert policy.reviewers.local == ["you"] and policy.approvals_required == 1


def test_example_names_the_person_at_the_terminal_as_its_reviewer() -> None:
    """So the decide line `make run` prints is accepted without --as."""
    demo = load_config(ROOT / "config.example.yaml", {"USER": "alice"}).loops[0]
    assert demo.review.to_policy().reviewers.local == ["alice"]


def test_example_takes_host_and_port_from_a_platforms_environment() -> None:
    """A platform running the Procfile's bare `loopbot serve` sets $PORT and, for 0.0.0.0, $HOST."""
    config = load_config(ROOT / "config.example.yaml", {"HOST": "0.0.0.0", "PORT": "5000"})
    assert (config.server.host, config.server.port) == ("0.0.0.0", 5000)


def test_example_documents_every_key() -> None:
    text = (ROOT / "config.example.yaml").read_text()
    for key in [
        "state_dir", "timezone", "host", "port", "misfire_grace_time", "poll_interval", "bot_token",
        "signing_secret", "app_token", "api_base_url", "command", "token", "app_id", "private_key",
        "installation_id", "webhook_secret", "base_url", "name", "pattern", "factory", "schedule", "cron",
        "interval", "run_on_start", "overlap", "options", "checkpoint", "preset", "post_to", "reviewers",
        "slack_users", "slack_groups", "github_users", "github_teams", "github_min_permission", "local",
        "approvals_required", "remind_after", "escalate_after", "escalate_to", "decide_after", "default",
        "allow_default_approve",
    ]:  # fmt: skip
        assert f"{key}:" in text, key


def test_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "loops: []\n")
    config = load_config(path, {})
    assert config.state_dir == tmp_path / "state" and config.timezone == "UTC"
    assert (config.server.host, config.server.port) == ("127.0.0.1", 8000)
    assert (config.scheduler.misfire_grace_time, config.scheduler.poll_interval) == (3600, 0.5)
    assert load_config(path, {"PORT": "5123"}).server.port == 5123
    assert load_config(write(tmp_path, "server: {port: 7000}\n"), {"PORT": "5123"}).server.port == 7000
    assert load_config(write(tmp_path, ""), {}).loops == []


def test_host_defaults_to_env_host_only_when_the_file_sets_none(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, "loops: []\n"), {"HOST": "0.0.0.0"}).server.host == "0.0.0.0"
    assert load_config(write(tmp_path, "server: {port: 1}\n"), {"HOST": "0.0.0.0"}).server.host == "0.0.0.0"
    assert load_config(write(tmp_path, "server: {host: '::1'}\n"), {"HOST": "0.0.0.0"}).server.host == "::1"
    assert load_config(write(tmp_path, "loops: []\n"), {"HOST": ""}).server.host == "127.0.0.1"


def test_a_bad_port_from_env_names_port_not_only_a_key_the_file_lacks(tmp_path: Path) -> None:
    error = one_error(tmp_path, "loops: []\n", {"PORT": "abc"})
    assert error.startswith("server.port: ")
    assert "the value 'abc' comes from $PORT" in error and "or set server.port in the file" in error
    in_file = one_error(tmp_path, "server: {port: abc}\n", {"PORT": "abc"})
    assert in_file.startswith("server.port: ") and "$PORT" not in in_file


def test_env_substitution(tmp_path: Path) -> None:
    text = """
    state_dir: ${STATE:-/tmp/default-state}
    timezone: "${TZ_NAME}"
    server: {port: "${PORT:-8123}"}
    loops:
      - name: demo
        pattern: demo
        options: {price: "$$5", note: "a ${WHO}: {not yaml}"}
    """
    config = load_config(write(tmp_path, text), {"TZ_NAME": "Asia/Tokyo", "WHO": "b, c"})
    assert str(config.state_dir) == "/tmp/default-state" and config.timezone == "Asia/Tokyo"
    assert config.server.port == 8123
    assert config.loops[0].options == {"price": "$5", "note": "a b, c: {not yaml}"}


def test_missing_env_var_names_key_and_variable(tmp_path: Path) -> None:
    error = one_error(tmp_path, "slack:\n  bot_token: ${SLACK_BOT_TOKEN}\n  signing_secret: x\n")
    assert error.startswith("slack.bot_token: environment variable SLACK_BOT_TOKEN is not set")


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("timezne: UTC\n", "timezne", 'did you mean "timezone"'),
        ("server: {prot: 1}\n", "server.prot", 'did you mean "port"'),
        (
            "loops:\n- {name: a, pattern: demo, shedule: {interval: 1m}}\n",
            "loops[0].shedule",
            'did you mean "schedule"',
        ),
        (
            "loops:\n- {name: a, pattern: demo, review: {timeout: {decide_afer: 1h}}}\n",
            "loops[0].review.timeout.decide_afer",
            "unknown key",
        ),
        (
            "loops:\n- {name: a, pattern: demo, checkpoint: {trigger_on_failur: true}}\n",
            "loops[0].checkpoint",
            "trigger_on_failure",
        ),
    ],
)
def test_unknown_keys_are_refused_with_their_path(tmp_path: Path, text: str, where: str, fragment: str) -> None:
    error = one_error(tmp_path, text)
    assert error.startswith(f"{where}: ") and fragment in error


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("loops:\n- {pattern: demo}\n", "loops[0].name"),
        ("slack: {signing_secret: x}\n", "slack.bot_token"),
        (
            "loops:\n- {name: a, pattern: demo, review: {post_to: [{github: {issue: 3}}]}}\ngithub: {token: t}\n",
            "loops[0].review.post_to[0].github.repository",
        ),
    ],
)
def test_missing_required_keys_are_named(tmp_path: Path, text: str, where: str) -> None:
    assert one_error(tmp_path, text) == f"{where}: required key is missing"


@pytest.mark.parametrize(
    "loop",
    ["{name: a}", "{name: a, pattern: demo, factory: 'm:f'}"],
)
def test_exactly_one_of_pattern_and_factory(tmp_path: Path, loop: str) -> None:
    error = one_error(tmp_path, f"loops:\n- {loop}\n")
    assert error.startswith("loops[0]: give exactly one of pattern") and "factory" in error


@pytest.mark.parametrize(
    ("schedule", "where", "fragment"),
    [
        ('{cron: "61 * * * *"}', "loops[1].schedule.cron", "invalid cron expression '61 * * * *'"),
        ('{cron: "* * *"}', "loops[1].schedule.cron", "5 fields"),
        ('{cron: "0 9 * * 8"}', "loops[1].schedule.cron", "out of range"),
        (
            "{cron: '0 9 * * *', timezone: Mars/Olympus}",
            "loops[1].schedule.timezone",
            "unknown timezone 'Mars/Olympus'",
        ),
        ("{interval: 30x}", "loops[1].schedule.interval", "invalid duration '30x'"),
        ("{interval: 0}", "loops[1].schedule.interval", "longer than zero"),
        ("{interval: 1h, cron: '* * * * *'}", "loops[1].schedule", "exactly one of cron"),
        ("{}", "loops[1].schedule", "exactly one of cron"),
        ("{interval: 1h, timezone: UTC}", "loops[1].schedule", "cron schedules only"),
    ],
)
def test_bad_schedules_name_their_key(tmp_path: Path, schedule: str, where: str, fragment: str) -> None:
    text = f"loops:\n- {{name: ok, pattern: demo}}\n- {{name: bad, pattern: demo, schedule: {schedule}}}\n"
    error = one_error(tmp_path, text)
    assert error.startswith(f"{where}: ") and fragment in error, error


@pytest.mark.parametrize(
    ("cron", "stored"),
    [
        ("0 9 * * 1-5", "0 9 * * mon,tue,wed,thu,fri"),
        ("0 9 * * 0", "0 9 * * sun"),
        ("0 9 * * 7", "0 9 * * sun"),
        ("0 9 * * mon-fri", "0 9 * * mon-fri"),
        ("*/5 * * * *", "*/5 * * * *"),
    ],
)
def test_numeric_weekdays_follow_crontab_not_apscheduler(tmp_path: Path, cron: str, stored: str) -> None:
    config = load_config(write(tmp_path, f"loops:\n- {{name: a, pattern: demo, schedule: {{cron: '{cron}'}}}}\n"), {})
    schedule = config.loops[0].schedule
    assert schedule is not None and schedule.cron == stored


def test_bad_top_level_timezone(tmp_path: Path) -> None:
    assert one_error(tmp_path, "timezone: Nowhere/Land\n").startswith("timezone: unknown timezone")


@pytest.mark.parametrize(
    ("text", "where", "fragment"),
    [
        ("loops:\n- {name: Daily Triage, pattern: demo}\n", "loops[0].name", "lower-case"),
        ("loops:\n- {name: a, pattern: demo}\n- {name: a, pattern: demo}\n", "loops[1].name", "used twice"),
        ("loops:\n- {name: a, factory: nocolon}\n", "loops[0].factory", "module:callable"),
        ("loops:\n- {name: a, pattern: demo, overlap: sometimes}\n", "loops[0].overlap", "skip"),
        (
            "loops:\n- {name: a, pattern: demo, review: {approvals_required: 0}}\n",
            "loops[0].review.approvals_required",
            "1",
        ),
        (
            "loops:\n- {name: a, pattern: demo, review: {timeout: {default: approve}}}\n",
            "loops[0].review.timeout",
            "allow_default_approve",
        ),
        (
            "loops:\n- {name: a, pattern: demo, review: {timeout: {escalate_after: 1h}}}\n",
            "loops[0].review.timeout",
            "escalate_to",
        ),
        (
            "loops:\n- {name: a, pattern: demo, review: {post_to: [{slack: {channel: C1}}]}}\n",
            "loops[0].review.post_to[0].slack",
            "top-level slack",
        ),
        (
            "loops:\n- {name: a, pattern: demo, review: {post_to: [{}]}}\n",
            "loops[0].review.post_to[0]",
            "exactly one of",
        ),
        (
            "loops:\n- {name: a, pattern: demo, checkpoint: {trigger_every_n_iterations: 0}}\n",
            "loops[0].checkpoint",
            "positive",
        ),
        (
            "loops:\n- {name: a, pattern: demo, checkpoint: {preset: yolo}}\n",
            "loops[0].checkpoint.preset",
            "production",
        ),
        ("github: {token: t, app_id: 1}\n", "github", "not both"),
        ("github: {app_id: 1}\n", "github", "set token"),
        ("slack: {bot_token: x}\n", "slack", "signing_secret"),
        ("server: {port: 70000}\n", "server.port", "65535"),
        ("scheduler: {poll_interval: 0}\n", "scheduler.poll_interval", "greater than 0"),
    ],
)
def test_invalid_values_name_their_key(tmp_path: Path, text: str, where: str, fragment: str) -> None:
    error = one_error(tmp_path, text)
    assert error.startswith(f"{where}: ") and fragment in error, error


def test_default_approve_is_allowed_when_explicit(tmp_path: Path) -> None:
    text = (
        "loops:\n- {name: a, pattern: demo, "
        "review: {timeout: {default: approve, allow_default_approve: true, decide_after: 1h}}}\n"
    )
    policy = load_config(write(tmp_path, text), {}).loops[0].review.to_policy()
    assert policy.default == "approve" and policy.allow_default_approve


def test_several_errors_are_all_reported(tmp_path: Path) -> None:
    errors = errors_of(tmp_path, "timezne: UTC\nserver: {port: nope}\n")
    assert [e.split(":")[0] for e in errors] == ["server.port", "timezne"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("loops: [\n", "line "), ("- just\n- a list\n", "(top level): expected a mapping")],
)
def test_unreadable_documents(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in one_error(tmp_path, text)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("timezone: UTC\ntimezone: Europe/Paris\n", "line 2: key 'timezone' appears twice (first on line 1)"),
        (
            "loops:\n- name: a\n  pattern: demo\n  schedule: {interval: 1m}\n  schedule: {cron: '0 9 * * *'}\n",
            "line 5: key 'schedule' appears twice (first on line 4)",
        ),
    ],
)
def test_a_repeated_key_is_refused_not_silently_replaced(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in one_error(tmp_path, text)


def test_yaml_merge_keys_still_work_and_explicit_keys_override_them(tmp_path: Path) -> None:
    text = (
        "loops:\n"
        "- &base {name: a, pattern: demo, run_on_start: true}\n"
        "- <<: *base\n"
        "  name: b\n"
    )
    loops = load_config(write(tmp_path, text), {}).loops
    assert [(loop.name, loop.run_on_start) for loop in loops] == [("a", True), ("b", True)]


def test_the_same_key_in_different_mappings_is_fine(tmp_path: Path) -> None:
    text = "loops:\n- {name: a, pattern: demo}\n- {name: b, pattern: demo}\n"
    assert [loop.name for loop in load_config(write(tmp_path, text), {}).loops] == ["a", "b"]


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"{tmp_path / 'absent.yaml'}: file not found"):
        load_config(tmp_path / "absent.yaml", {})


def _all_text(config: BotConfig) -> str:
    return "\n".join([repr(config), str(config), json.dumps(config.redacted()), config.summary(), repr(config.slack)])


def test_secrets_never_show_in_repr_str_redacted_or_summary(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, FULL), SECRETS)
    text = _all_text(config)
    for secret in SECRETS.values():
        assert secret not in text
    assert config.redacted()["slack"]["bot_token"] == "***"
    assert sorted(config.secret_values()) == sorted(SECRETS.values())


def test_secrets_never_show_in_errors(tmp_path: Path) -> None:
    text = FULL.replace("port: 9000", "port: '${SLACK_BOT_TOKEN}'")
    text = text.replace("poll_interval: 90s", "poll_interval: ${GITHUB_TOKEN}")
    errors = "\n".join(errors_of(tmp_path, text, SECRETS))
    assert "server.port" in errors and "github.poll_interval" in errors
    for secret in SECRETS.values():
        assert secret not in errors


def test_summary_reads_well(tmp_path: Path) -> None:
    summary = load_config(write(tmp_path, FULL), SECRETS).summary()
    assert "channels: local, slack (POST /slack/events), github (POST /github/webhook, polling every 1m30s)" in summary
    assert "triage: pattern daily-triage; cron '0 9 * * mon-fri' America/New_York; 2 approval(s) needed" in summary
    assert "sweep: factory mypkg.loops:build; every 30m, runs on start" in summary


@pytest.mark.parametrize(
    ("checkpoint", "shown"),
    [
        ("{preset: disabled}", "checkpoints disabled"),
        ("{enabled: false}", "checkpoints disabled"),
        ("{preset: disabled, enabled: true}", "1 approval(s) needed"),
        ("{preset: production}", "1 approval(s) needed"),
    ],
)
def test_the_summary_counts_no_approvals_for_a_loop_that_never_pauses(
    tmp_path: Path, checkpoint: str, shown: str
) -> None:
    """Issue 13 item 8: "1 approval(s) needed" showed for a loop whose checkpoints are disabled."""
    text = f"loops:\n  - {{name: quiet, pattern: demo, checkpoint: {checkpoint}}}\n"
    summary = load_config(write(tmp_path, text), {}).summary()
    assert f"quiet: pattern demo; on request; {shown}" in summary


def test_a_missing_config_names_loopbot_init(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "my config.yaml", {})
    assert str(info.value).endswith(
        f"my config.yaml: file not found; `loopbot init '{tmp_path}/my config.yaml'` writes the commented example "
        "(config.example.yaml) there, or pass --config PATH"
    )


def test_the_summary_says_how_each_channel_takes_answers(tmp_path: Path) -> None:
    slack_only = FULL.split("github:")[0] + "loops: []\n"
    config = load_config(write(tmp_path, slack_only), SECRETS)
    assert config.channels() == ["local", "slack (POST /slack/events)"]
    socket = slack_only.replace("slack:\n", "slack:\n  app_token: xapp-1\n")
    assert load_config(write(tmp_path, socket), SECRETS).channels()[1] == "slack (Socket Mode)"
    local = load_config(write(tmp_path, "loops: []\n"), {})
    assert "channels: local\n" in local.summary()


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ("review: {timeout: {remind_after: 99999999999d}}", "loops[0].review.timeout.remind_after"),
        ("review: {timeout: {decide_after: 3000000d}}", "loops[0].review.timeout.decide_after"),
        ("review: {timeout: {decide_after: 367d}}", "loops[0].review.timeout.decide_after"),
        ("review: {timeout: {remind_after: 100000000000000000000}}", "loops[0].review.timeout.remind_after"),
        ("review: {timeout: {remind_after: .inf}}", "loops[0].review.timeout.remind_after"),
        ("schedule: {interval: 400d}", "loops[0].schedule.interval"),
    ],
)
def test_durations_over_the_cap_are_refused_with_their_key_path(tmp_path: Path, block: str, where: str) -> None:
    error = one_error(tmp_path, f"loops:\n- {{name: a, pattern: demo, {block}}}\n")
    assert error.startswith(f"{where}: ") and "too long: the longest allowed is 366d" in error, error


def test_the_longest_duration_is_accepted(tmp_path: Path) -> None:
    text = "loops:\n- {name: a, pattern: demo, review: {timeout: {decide_after: 366d}}}\n"
    config = load_config(write(tmp_path, text), {})
    assert config.loops[0].review.to_policy().decide_after == timedelta(days=366)


def test_an_empty_local_reviewer_list_is_kept_not_read_as_anyone(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "loops:\n- {name: a, pattern: demo, review: {reviewers: {local: []}}}\n"), {})
    reviewers = config.loops[0].review.to_policy().reviewers
    assert reviewers.local == [] and not reviewers.anyone


PEOPLE_LOOP = """
slack: {bot_token: xoxb-1, signing_secret: s}
loops:
  - name: triage
    pattern: demo
    review:
      reviewers: {local: [alice], slack_users: [U0AAA]%s}
      approvals_required: 2
"""


def test_n_of_m_across_channels_without_people_is_warned_about(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, PEOPLE_LOOP % ""), {})
    assert config.review_warnings() == [
        "loop triage: approvals_required is 2 and reviewers span local, slack; without a people: entry "
        "one person voting on two channels counts twice"
    ]
    mapped = "people:\n  - {name: alice, local: alice, slack: U0AAA}\n" + PEOPLE_LOOP % ""
    assert load_config(write(tmp_path, mapped), {}).review_warnings() == []


@pytest.mark.parametrize(
    ("people", "problem"),
    [
        ("  - {name: alice, slack: U1}\n  - {name: Alice, slack: U2}\n",
         "people[1].name: 'Alice' is listed twice"),
        ("  - {name: alice, slack: U1}\n  - {name: bob, slack: U1}\n",
         "people[1]: slack:U1 already belongs to 'alice'"),
    ],
)
def test_people_are_one_name_each_and_one_person_per_account(tmp_path: Path, people: str, problem: str) -> None:
    assert any(problem in line for line in errors_of(tmp_path, "people:\n" + people))


def test_reviewers_may_only_name_listed_people(tmp_path: Path) -> None:
    text = "people:\n  - {name: alice, slack: U1}\n" + PEOPLE_LOOP % ", people: [alcie]"
    assert any("reviewers.people: 'alcie' is not in the top-level people: list" in line and 'did you mean "alice"'
               in line for line in errors_of(tmp_path, text))
