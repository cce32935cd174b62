"""User-group lookups (cached, refreshed on a miss) and ``check_connection``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from adapters.channel import ChannelError
from adapters.slack.check import check_connection
from adapters.slack.client import SlackClient
from adapters.slack.directory import SlackDirectory
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi


def test_group_members_are_cached_and_refreshed(slack: FakeSlackApi) -> None:
    now = [0.0]
    directory = SlackDirectory(SlackClient(BOT_TOKEN, base_url=slack.base_url), ttl=60, refresh_gap=5,
                               clock=lambda: now[0])
    assert directory.group_members("S0OPS") == frozenset({"U0AAA", "U0BBB"})
    assert directory.is_member("S0OPS", "U0AAA")
    assert len(slack.calls_to("usergroups.users.list")) == 1
    slack.usergroups["S0OPS"].append("U0NEW")
    now[0] = 1
    assert not directory.is_member("S0OPS", "U0NEW"), "a miss right after a fetch does not refetch"
    now[0] = 6
    assert directory.is_member("S0OPS", "U0NEW"), "a miss after the gap refreshes"
    assert len(slack.calls_to("usergroups.users.list")) == 2
    now[0] = 7
    assert not directory.is_member("S0OPS", "U0OUT") and len(slack.calls_to("usergroups.users.list")) == 2
    now[0] = 70
    directory.group_members("S0OPS")
    assert len(slack.calls_to("usergroups.users.list")) == 3, "the ttl expires"
    assert slack.calls_to("usergroups.users.list")[0].params["usergroup"] == "S0OPS"


def test_a_failed_refresh_keeps_the_earlier_members(slack: FakeSlackApi) -> None:
    now = [0.0]
    directory = SlackDirectory(SlackClient(BOT_TOKEN, base_url=slack.base_url), clock=lambda: now[0])
    directory.group_members("S0OPS")
    slack.fail("usergroups.users.list", status=500)
    now[0] = 100
    assert directory.group_members("S0OPS") == frozenset({"U0AAA", "U0BBB"})
    with pytest.raises(ChannelError):
        directory.group_members("S0NONE")


def test_check_connection_names_the_bot(slack: FakeSlackApi) -> None:
    client = SlackClient(BOT_TOKEN, base_url=slack.base_url)
    assert check_connection(client, ["C0REVIEW"]) == "bot @loopbot in team Test Team (T0TEAM)"


def test_check_connection_says_what_is_wrong(slack: FakeSlackApi) -> None:
    client = SlackClient(BOT_TOKEN, base_url=slack.base_url)
    slack.scopes = ["chat:write", "commands"]
    slack.fail("conversations.history", error="not_in_channel")
    with pytest.raises(ChannelError) as raised:
        check_connection(client, ["C0REVIEW"])
    message = str(raised.value)
    assert "lacks the scopes app_mentions:read, channels:history" in message
    assert "not in Slack channel C0REVIEW: invite it" in message
    slack.fail("auth.test", error="invalid_auth")
    with pytest.raises(ChannelError, match="slack.bot_token"):
        check_connection(client)
    with pytest.raises(ChannelError, match="invalid_auth"):
        check_connection(SlackClient("xoxp-user-token", base_url=slack.base_url))


def test_the_manifest_asks_for_the_scopes_check_connection_wants() -> None:
    from adapters.slack.check import REQUIRED_SCOPES

    manifest = yaml.safe_load((Path(__file__).parents[3] / "slack-manifest.yaml").read_text())
    assert sorted(manifest["oauth_config"]["scopes"]["bot"]) == sorted(REQUIRED_SCOPES)
    assert manifest["settings"]["event_subscriptions"]["bot_events"] == ["app_mention"]
    assert manifest["features"]["slash_commands"][0]["url"].endswith("/slack/events")


def test_check_connection_asks_for_files_write_where_a_long_proposal_is_uploaded(slack: FakeSlackApi) -> None:
    client = SlackClient(BOT_TOKEN, base_url=slack.base_url)
    slack.scopes = [scope for scope in slack.scopes or [] if scope != "files:write"]
    with pytest.raises(ChannelError, match=r"lacks the scopes files:write\b"):
        check_connection(client)
    manifest = yaml.safe_load((Path(__file__).parents[3] / "slack-manifest.yaml").read_text(encoding="utf-8"))
    assert "files:write" in manifest["oauth_config"]["scopes"]["bot"]
