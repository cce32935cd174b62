"""SlackChannel against the fake Slack Web API: threads, idempotent reposts, updates, errors."""

from __future__ import annotations

import pytest

from adapters.channel import Answer, AnswerKind, Channel, ChannelError, MessageRef, Target
from adapters.slack.channel import SlackChannel
from adapters.slack.client import SlackClient
from tests.adapters.slack.conftest import make_post
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi

TARGET = Target("slack", channel="C0REVIEW")


def channel_for(slack: FakeSlackApi, **options: bool) -> SlackChannel:
    return SlackChannel(SlackClient(BOT_TOKEN, base_url=slack.base_url), **options)


def test_is_a_channel(slack: FakeSlackApi) -> None:
    assert isinstance(channel_for(slack), Channel)
    assert channel_for(slack).name == "slack"


def test_one_parent_per_run_and_each_review_in_its_thread(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    first = channel.post_request(TARGET, make_post())
    second = channel.post_request(TARGET, make_post(review_id="triage-18"))
    posts = slack.calls_to("chat.postMessage")
    assert len(posts) == 3
    parent = posts[0].params
    assert parent["metadata"] == {"event_type": "loopbot_run",
                                  "event_payload": {"run_id": "triage-run-3", "loop": "triage"}}
    assert "thread_ts" not in parent and "triage run triage-run-3 started" in parent["text"]
    parent_ts = slack.channel_messages("C0REVIEW")[0]["ts"]
    assert first.data == {"channel": "C0REVIEW", "ts": first.data["ts"], "thread_ts": parent_ts}
    assert second.data["thread_ts"] == parent_ts and second.data["ts"] != first.data["ts"]
    assert posts[1].params["metadata"]["event_payload"]["review_id"] == "triage-17"
    assert posts[1].params["thread_ts"] == parent_ts and "reply_broadcast" not in posts[1].params
    assert any(b["type"] == "actions" for b in posts[1].params["blocks"])
    assert first.target == "slack:C0REVIEW"
    # the bot finds the review an id-less "@loopbot approve" in this thread answers
    assert first.matches({"channel": "C0REVIEW", "thread_ts": parent_ts})


def test_a_new_run_gets_a_new_parent(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    one = channel.post_request(TARGET, make_post())
    two = channel.post_request(TARGET, make_post(review_id="triage-18", run_id="triage-run-4"))
    assert one.data["thread_ts"] != two.data["thread_ts"]
    assert len(slack.calls_to("chat.postMessage")) == 4


def test_broadcast_option(slack: FakeSlackApi) -> None:
    channel_for(slack, broadcast=True).post_request(TARGET, make_post())
    assert slack.calls_to("chat.postMessage")[1].params["reply_broadcast"] is True


def test_repost_after_a_crash_finds_the_first_messages(slack: FakeSlackApi) -> None:
    first = channel_for(slack).post_request(TARGET, make_post())
    slack.post("C0REVIEW", "someone else talks in the channel")
    again = channel_for(slack).post_request(TARGET, make_post())  # a new process: no cache
    assert again == first
    assert len(slack.calls_to("chat.postMessage")) == 2
    history = slack.calls_to("conversations.history")[-1].params
    assert history["include_all_metadata"] in (True, "1", "true")


def test_crash_between_parent_and_review_posts_the_review_once(slack: FakeSlackApi) -> None:
    slack.fail("chat.postMessage", status=500, times=1, skip=1)  # the parent is posted, the review is not
    channel = channel_for(slack)
    with pytest.raises(ChannelError):
        channel.post_request(TARGET, make_post())
    ref = channel_for(slack).post_request(TARGET, make_post())
    ref_again = channel_for(slack).post_request(TARGET, make_post())
    assert ref == ref_again
    parents = [m for m in slack.channel_messages("C0REVIEW") if m["metadata"]["event_type"] == "loopbot_run"]
    assert len(parents) == 1


def test_two_targets_two_refs(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    refs = [channel.post_request(Target("slack", channel=c), make_post()) for c in ("C0ONE", "C0TWO")]
    assert [r.data["channel"] for r in refs] == ["C0ONE", "C0TWO"]
    assert [r.target for r in refs] == ["slack:C0ONE", "slack:C0TWO"]
    assert len(slack.calls_to("chat.postMessage")) == 4


def test_update_removes_buttons_keeps_outcome_and_replies_once(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    ref = channel.post_request(TARGET, make_post())
    channel.post_update(ref, make_post(), "Reminder: still waiting")
    assert not slack.calls_to("chat.update"), "an open review keeps its message and buttons"
    outcome = "Decided: APPROVE by slack:U0AAA at 2026-11-29T09:00:00+00:00 - go"
    channel.post_update(ref, make_post(status="decided"), outcome)
    channel_for(slack).post_update(MessageRef.from_dict(ref.to_dict()), make_post(status="decided"), outcome)
    review = next(m for m in slack.channel_messages("C0REVIEW") if m["ts"] == ref.data["ts"])
    assert not any(b["type"] == "actions" for b in review["blocks"])
    assert "Approved by <@U0AAA>: go" in str(review["blocks"])
    # the run's end later: the message keeps saying who approved
    channel_for(slack).post_update(ref, make_post(status="applied"), "run triage-run-3 completed")
    review = next(m for m in slack.channel_messages("C0REVIEW") if m["ts"] == ref.data["ts"])
    assert "Approved by <@U0AAA>: go" in str(review["blocks"]) and "(applied)" in str(review["blocks"])
    replies = [c.params["text"] for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")][1:]
    assert replies == ["Reminder: still waiting", "Approved by <@U0AAA>: go", "run triage-run-3 completed"]


def test_escalation_is_a_new_message_once(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    channel.post_request(TARGET, make_post())
    pager = Target("slack", channel="C0PAGER")
    ref = channel.post_escalation(pager, make_post(), "Escalated: no answer for 8h")
    again = channel_for(slack).post_escalation(pager, make_post(), "Escalated: no answer for 8h")
    assert ref == again and ref.target == "slack:C0PAGER"
    posted = slack.channel_messages("C0PAGER")
    assert len(posted) == 1 and "thread_ts" not in posted[0]
    assert "Escalated: no answer for 8h" in str(posted[0]["blocks"])
    assert any(b["type"] == "actions" for b in posted[0]["blocks"])
    assert ref.matches({"channel": "C0PAGER", "thread_ts": posted[0]["ts"]})
    channel.post_update(ref, make_post(status="decided"), "Decided: REJECT by slack:U0AAA at T - no")
    assert slack.channel_messages("C0PAGER")[0]["metadata"]["event_type"] == "loopbot_escalation"


def test_answer_is_ephemeral_or_goes_to_the_response_url(slack: FakeSlackApi) -> None:
    channel = channel_for(slack)
    counted = Answer(AnswerKind.COUNTED, "Counted: 1 of 2 approvals <so far>", "triage-17")
    channel.answer({"channel": "C0REVIEW", "user": "U0AAA", "thread_ts": "1.2"}, counted)
    (ephemeral,) = slack.calls_to("chat.postEphemeral")
    assert ephemeral.params == {"channel": "C0REVIEW", "user": "U0AAA", "thread_ts": "1.2",
                                "text": "Counted: 1 of 2 approvals &lt;so far&gt;"}
    channel.answer({"response_url": slack.response_url}, counted)
    (posted,) = slack.calls_to("response_url")
    assert posted.params["response_type"] == "ephemeral" and "1 of 2" in posted.params["text"]
    with pytest.raises(ChannelError) as nowhere:
        channel.answer({}, counted)
    assert nowhere.value.permanent


def test_rate_limit_is_a_retry_after_not_a_sleep(slack: FakeSlackApi) -> None:
    slack.fail("conversations.history", status=429, retry_after=7)
    with pytest.raises(ChannelError) as raised:
        channel_for(slack).post_request(TARGET, make_post())
    assert raised.value.retry_after == 7 and not raised.value.permanent
    assert len(slack.calls_to("conversations.history")) == 1, "no sleeping retry inside the client"


def test_server_error_is_transient(slack: FakeSlackApi) -> None:
    slack.fail("chat.postMessage", status=500, times=2)
    channel = channel_for(slack)
    for _ in range(2):
        with pytest.raises(ChannelError) as raised:
            channel.post_request(TARGET, make_post())
        assert not raised.value.permanent and raised.value.retry_after is None
    ref = channel.post_request(TARGET, make_post())
    assert ref.data["ts"]


@pytest.mark.parametrize(("error", "advice"), [
    ("not_in_channel", "invite it there with /invite @loopbot"),
    ("channel_not_found", "channel id"),
    ("is_archived", "archived"),
    ("invalid_auth", "slack.bot_token"),
])
def test_errors_no_retry_can_fix_are_permanent(slack: FakeSlackApi, error: str, advice: str) -> None:
    slack.fail("conversations.history", error=error)
    with pytest.raises(ChannelError) as raised:
        channel_for(slack).post_request(TARGET, make_post())
    assert raised.value.permanent
    assert advice in str(raised.value) and "C0REVIEW" in str(raised.value) or error == "invalid_auth"


def test_missing_scope_names_the_scope(slack: FakeSlackApi) -> None:
    slack.fail("conversations.history", error="missing_scope", needed="channels:history")
    with pytest.raises(ChannelError) as raised:
        channel_for(slack).post_request(TARGET, make_post())
    assert raised.value.permanent and "channels:history" in str(raised.value)


def test_unreachable_slack_is_transient() -> None:
    client = SlackClient(BOT_TOKEN, base_url="http://127.0.0.1:9/api/")
    with pytest.raises(ChannelError) as raised:
        SlackChannel(client).post_request(TARGET, make_post())
    assert not raised.value.permanent


def test_answer_falls_back_to_the_response_url_where_the_bot_is_not(slack: FakeSlackApi) -> None:
    slack.fail("chat.postEphemeral", error="not_in_channel")
    respond = {"channel": "C0ELSE", "user": "U0AAA", "response_url": slack.response_url}
    channel_for(slack).answer(respond, Answer(AnswerKind.DECIDED, "Approved."))
    assert slack.calls_to("response_url")[0].params["text"] == "Approved."
