"""Long reviews and outcomes land whole in Slack: replies and files in the thread, once, within Slack's limits.

Also the fake Slack itself: it refuses what Slack refuses, so that the
tests above mean something.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from adapters.channel import ChannelError, MessageRef, Target
from adapters.slack.channel import EVENT_MORE, EVENT_UPDATE, SlackChannel
from adapters.slack.client import SlackClient
from loop_engine.proposal import Proposal, Table
from tests.adapters.slack.conftest import make_post, make_request
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi

TARGET = Target("slack", channel="C0REVIEW")
WHEN = "2026-11-29T09:00:00+00:00"


def channel_for(slack: FakeSlackApi) -> SlackChannel:
    return SlackChannel(SlackClient(BOT_TOKEN, base_url=slack.base_url))


def table_post(rows: int, **fields: Any) -> Any:
    table = Table(["issue", "title", "labels"], [[f"#{n}", f"Crash on start {n}", "add P1"] for n in range(rows)],
                  title="Changes")
    return make_post(request=make_request(proposal=Proposal(f"Approve to apply {rows} label changes", [table])),
                     **fields)


def thread_texts(slack: FakeSlackApi) -> str:
    return "\n".join(str(m.get("blocks")) for m in slack.channel_messages("C0REVIEW"))


def tagged(slack: FakeSlackApi, event_type: str) -> list[dict[str, Any]]:
    return [m for m in slack.channel_messages("C0REVIEW") if (m.get("metadata") or {}).get("event_type") == event_type]


def test_a_long_proposal_goes_on_in_thread_replies_posted_once(slack: FakeSlackApi) -> None:
    ref = channel_for(slack).post_request(TARGET, table_post(400))
    more = tagged(slack, EVENT_MORE)
    assert more and all(m["thread_ts"] == ref.data["thread_ts"] for m in more)
    assert [m["metadata"]["event_payload"]["part"] for m in more] == [str(n) for n in range(1, len(more) + 1)]
    shown = thread_texts(slack)
    assert all(re.search(rf"#{n}\s+Crash on start {n}\s", shown) for n in range(400))
    posted = len(slack.calls_to("chat.postMessage"))
    channel_for(slack).post_request(TARGET, table_post(400))  # the outbox's retry, in a new process
    assert len(slack.calls_to("chat.postMessage")) == posted


def test_a_retry_after_a_crash_posts_only_the_missing_parts(slack: FakeSlackApi) -> None:
    slack.fail("chat.postMessage", status=500, skip=2)  # the parent and the review land, the first part fails
    with pytest.raises(ChannelError):
        channel_for(slack).post_request(TARGET, table_post(400))
    assert not tagged(slack, EVENT_MORE)
    channel_for(slack).post_request(TARGET, table_post(400))
    parts = [m["metadata"]["event_payload"]["part"] for m in tagged(slack, EVENT_MORE)]
    assert parts == [str(n) for n in range(1, len(parts) + 1)] and parts
    assert len(tagged(slack, "loopbot_review")) == 1


def test_a_5000_row_proposal_is_uploaded_to_the_thread_once(slack: FakeSlackApi) -> None:
    ref = channel_for(slack).post_request(TARGET, table_post(5000))
    files = slack.uploaded("C0REVIEW")
    assert sorted(f["filename"] for f in files) == ["triage-17-Changes.csv", "triage-17-proposal.md"]
    assert all(f["thread_ts"] == ref.data["thread_ts"] for f in files)
    rows = list(csv.reader(io.StringIO(next(f["text"] for f in files if f["filename"].endswith(".csv")))))
    assert rows[0] == ["issue", "title", "labels"] and len(rows) == 5001
    assert rows[1:] == [[f"#{n}", f"Crash on start {n}", "add P1"] for n in range(5000)]
    assert "(5,000 table rows in all)" in thread_texts(slack)
    channel_for(slack).post_request(TARGET, table_post(5000))
    assert len(slack.calls_to("files.completeUploadExternal")) == 2


def test_without_files_write_the_upload_fails_saying_which_scope(slack: FakeSlackApi) -> None:
    slack.scopes = [s for s in slack.scopes or [] if s != "files:write"]
    with pytest.raises(ChannelError, match="files:write") as raised:
        channel_for(slack).post_request(TARGET, table_post(5000))
    assert raised.value.permanent
    assert not slack.uploaded()


def test_a_3500_character_reason_shows_the_outcome_and_the_whole_reason_in_the_thread(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    ref = channel.post_request(TARGET, make_post())
    reason = "<" * 800 + " " + "r" * 2700
    outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - {reason}"
    channel.post_update(ref, make_post(status="decided"), outcome)
    review = next(m for m in slack.channel_messages("C0REVIEW") if m["ts"] == ref.data["ts"])
    assert not any(b["type"] == "actions" for b in review["blocks"])
    assert "Rejected by <@U0AAA>: &lt;" in str(review["blocks"]) and "…" in str(review["blocks"])
    replies = tagged(slack, EVENT_UPDATE)
    whole = "".join(b["text"]["text"] for m in replies for b in m["blocks"] if b["type"] == "section")
    assert ("&lt;" * 800) in whole and ("r" * 2700) in whole
    channel_for(slack).post_update(MessageRef.from_dict(ref.to_dict()), make_post(status="decided"), outcome)
    assert len(tagged(slack, EVENT_UPDATE)) == len(replies)  # told once
    later = channel_for(slack)
    later.post_update(ref, make_post(status="applied"), "Run triage-run-3 rejected: too risky")
    review = next(m for m in slack.channel_messages("C0REVIEW") if m["ts"] == ref.data["ts"])
    assert "Rejected by <@U0AAA>: &lt;" in str(review["blocks"]), "a later re-render keeps the outcome"


def test_a_60k_reason_is_split_over_several_replies_once(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    ref = channel.post_request(TARGET, make_post())
    outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - " + "no " * 20_000
    channel.post_update(ref, make_post(status="decided"), outcome)
    parts = tagged(slack, EVENT_UPDATE)
    assert len(parts) >= 5
    assert sum(str(m["blocks"]).count("no") for m in parts) == 20_000
    channel_for(slack).post_update(ref, make_post(status="decided"), outcome)
    assert len(tagged(slack, EVENT_UPDATE)) == len(parts)


# --- the fake is as strict as Slack ---------------------------------------------------------------------------
def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


@pytest.mark.parametrize(("blocks", "error"), [
    ([_section("x" * 3001)], "invalid_blocks"),
    ([{"type": "context", "elements": [{"type": "mrkdwn", "text": "x" * 3001}]}], "invalid_blocks"),
    ([{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}], "invalid_blocks"),
    ([{"type": "section"}], "invalid_blocks"),  # neither text nor fields: slack_sdk's model refuses it
    ([{"type": "no_such_block"}], "invalid_blocks"),
    ([_section("x")] * 51, "invalid_blocks"),
    ([_section("x" * 2500)] * 5, "msg_blocks_too_long"),
])
def test_the_fake_refuses_what_slack_refuses(slack: FakeSlackApi, blocks: list[dict[str, Any]], error: str) -> None:
    slack.allow_invalid = True
    web = WebClient(BOT_TOKEN, base_url=slack.base_url)
    with pytest.raises(SlackApiError) as raised:
        web.chat_postMessage(channel="C0REVIEW", text="x", blocks=blocks)
    assert raised.value.response["error"] == error
    assert slack.refused[-1][:2] == ("chat.postMessage", error)
    assert not slack.channel_messages("C0REVIEW")


def test_leaving_the_fake_fails_a_test_whose_messages_slack_would_refuse() -> None:
    fake = FakeSlackApi().start()
    with pytest.raises(SlackApiError):
        WebClient(BOT_TOKEN, base_url=fake.base_url).chat_postMessage(channel="C0", text="x",
                                                                      blocks=[_section("x" * 3001)])
    with pytest.raises(AssertionError, match="Slack would have refused 1 message"):
        fake.stop()


def test_the_fake_takes_files_as_files_upload_v2_sends_them(slack: FakeSlackApi) -> None:
    web = WebClient(BOT_TOKEN, base_url=slack.base_url)
    parent = web.chat_postMessage(channel="C0REVIEW", text="parent")["ts"]
    web.files_upload_v2(channel="C0REVIEW", thread_ts=parent, filename="a.csv", title="A", content=b"a,b\n1,2\n")
    [file] = slack.uploaded("C0REVIEW")
    assert (file["filename"], file["title"], file["text"], file["thread_ts"]) == ("a.csv", "A", "a,b\n1,2\n", parent)
    shared = [m for m in slack.channel_messages("C0REVIEW") if m.get("files")]
    assert shared[0]["files"][0]["title"] == "A" and shared[0]["thread_ts"] == parent


def test_an_escalation_of_a_long_proposal_carries_it_on_in_its_own_thread(slack: FakeSlackApi) -> None:
    ref = channel_for(slack).post_escalation(Target("slack", channel="C0REVIEW"), table_post(400), "Escalated: 8h")
    more = tagged(slack, EVENT_MORE)
    assert more and {m["thread_ts"] for m in more} == {ref.data["ts"]}
    shown = thread_texts(slack)
    assert all(re.search(rf"#{n}\s+Crash on start {n}\s", shown) for n in range(400))
    channel_for(slack).post_escalation(Target("slack", channel="C0REVIEW"), table_post(400), "Escalated: 8h")
    assert len(tagged(slack, EVENT_MORE)) == len(more)
