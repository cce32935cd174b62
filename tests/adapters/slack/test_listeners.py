"""Intake through the Starlette route with requests signed as Slack signs them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from urllib.parse import quote, unquote, urlencode

import httpx
import pytest
from slack_sdk.signature import SignatureVerifier
from starlette.applications import Starlette

from adapters.channel import Answer, AnswerKind, Reply
from adapters.command_error import CommandError
from adapters.commands import Command
from adapters.slack.listeners import (
    FOREIGN_MODAL_TEXT,
    NOT_RECORDED_TEXT,
    WORKING_TEXT,
    ClickKeys,
    SeenEvents,
    build_app,
)
from adapters.vote_batches import one_by_one
from adapters.slack.route import slack_route
from loop_engine.checkpoint import HumanDecision
from tests.fakes.slack_api import BOT_TOKEN, FakeSlackApi, signed_headers

SECRET = "test-signing-secret"


class Recorder:
    """A VoteHandler that records replies, counts a dedupe key once, and may take its time."""

    def __init__(self, delay: float = 0.0) -> None:
        self.replies: list[Reply] = []
        self.delay = delay
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, reply: Reply) -> Answer:
        time.sleep(self.delay)
        with self._lock:
            self.replies.append(reply)
            if reply.dedupe_key is not None and reply.dedupe_key in self._seen:
                return Answer(AnswerKind.DUPLICATE, "Already counted.", reply.review_id)
            if reply.dedupe_key is not None:
                self._seen.add(reply.dedupe_key)
        return Answer(AnswerKind.COUNTED, f"Counted <{reply.review_id}>: 1 of 2 approvals", reply.review_id)


def make_server(slack: FakeSlackApi, recorder: Recorder, **options: float) -> Starlette:
    app = build_app(signing_secret=SECRET, handler=one_by_one(recorder), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url,
                    **options)  # type: ignore[arg-type]
    return Starlette(routes=[slack_route(app, signing_secret=SECRET)])


async def send(server: Starlette, body: str, *, json_body: bool = False, secret: str = SECRET,
               timestamp: int | None = None, **headers: str) -> httpx.Response:
    signed = signed_headers(secret, body, timestamp=timestamp, json_body=json_body, **headers)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://slack.test") as http:
        return await http.post("/slack/events", content=body, headers=signed)


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.02)


def slash(text: str, **fields: str) -> str:
    return urlencode({
        "token": "deprecated", "team_id": "T0TEAM", "team_domain": "test", "channel_id": "C0REVIEW",
        "channel_name": "ops", "user_id": "U0AAA", "user_name": "alice", "command": "/loopbot", "text": text,
        "response_url": fields.pop("response_url", "https://hooks.slack.test/commands/1"),
        "trigger_id": "13345224609.738474920.8088930838d88f008e0", "api_app_id": "A0APP", **fields,
    })


def interactive(payload: dict[str, object]) -> str:
    return "payload=" + quote(json.dumps(payload))


def click(action_id: str, *, action_ts: str = "1700000100.000001", user: str = "U0AAA",
          response_url: str = "https://hooks.slack.test/actions/1") -> str:
    return interactive({
        "type": "block_actions", "user": {"id": user, "username": "alice", "team_id": "T0TEAM"},
        "team": {"id": "T0TEAM"}, "api_app_id": "A0APP", "trigger_id": "111.222.abc", "response_url": response_url,
        "container": {"type": "message", "message_ts": "1700000002.000100", "channel_id": "C0REVIEW",
                      "is_ephemeral": False},
        "channel": {"id": "C0REVIEW", "name": "ops"},
        "message": {"ts": "1700000002.000100", "thread_ts": "1700000001.000100", "text": "Review triage-17"},
        "actions": [{"type": "button", "action_id": action_id, "block_id": "loopbot_review:triage-17",
                     "value": "triage-17", "text": {"type": "plain_text", "text": "x"}, "action_ts": action_ts}],
    })


def submission(callback_id: str, field: str, value: str) -> str:
    metadata = json.dumps({"review_id": "triage-17", "channel": "C0REVIEW", "message_ts": "1700000002.000100",
                           "thread_ts": "1700000001.000100", "response_url": ""})
    return interactive({
        "type": "view_submission", "user": {"id": "U0AAA", "username": "alice", "team_id": "T0TEAM"},
        "team": {"id": "T0TEAM"}, "api_app_id": "A0APP", "trigger_id": "333.444.def",
        "view": {"id": "V0MODAL", "type": "modal", "callback_id": callback_id, "private_metadata": metadata,
                 "state": {"values": {field: {"value": {"type": "plain_text_input", "value": value}}}}},
    })


def mention(text: str, *, event_id: str = "Ev0001", thread_ts: str | None = "1700000001.000100") -> str:
    event = {"type": "app_mention", "user": "U0AAA", "text": text, "ts": "1700000050.000100",
             "channel": "C0REVIEW", "event_ts": "1700000050.000100"}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return json.dumps({"token": "x", "team_id": "T0TEAM", "api_app_id": "A0APP", "type": "event_callback",
                       "event_id": event_id, "event_time": 1700000050, "event": event})


def test_the_documented_signature_test_vector() -> None:
    body = ("token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
            "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
            "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
            "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")
    verifier = SignatureVerifier("8f742231b10e8888abcd99yyyzzz85a5")
    expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    assert verifier.generate_signature(timestamp="1531420618", body=body) == expected
    assert signed_headers("8f742231b10e8888abcd99yyyzzz85a5", body, timestamp=1531420618)["x-slack-signature"] == (
        expected)


async def test_slash_approve_is_answered_in_the_ack(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    response = await send(make_server(slack, recorder), slash("approve triage-17 looks good"))
    assert response.status_code == 200
    assert response.json() == {"text": "Counted &lt;triage-17&gt;: 1 of 2 approvals", "response_type": "ephemeral"}
    (reply,) = recorder.replies
    assert reply.voter.qualified == "slack:U0AAA" and reply.voter.display == "alice"
    assert reply.review_id == "triage-17" and reply.via == "slash"
    assert reply.command == Command(HumanDecision.APPROVE, "triage-17", "looks good")
    assert reply.respond["channel"] == "C0REVIEW" and reply.respond["user"] == "U0AAA"
    assert reply.dedupe_key == "slack:command:13345224609.738474920.8088930838d88f008e0"
    assert slack.calls_to("auth.test"), "Bolt checks the token with auth.test on the first request"


@pytest.mark.parametrize(("text", "verb"), [("status", "status"), ("help", "help"), ("", "help")])
async def test_status_and_help_go_to_the_handler(slack: FakeSlackApi, text: str, verb: str) -> None:
    recorder = Recorder()
    await send(make_server(slack, recorder), slash(text))
    assert isinstance(recorder.replies[0].command, Command) and recorder.replies[0].command.verb == verb


async def test_an_invalid_command_still_reaches_the_handler_for_its_answer(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    await send(make_server(slack, recorder), slash("aprove triage-17"))
    assert isinstance(recorder.replies[0].command, CommandError)


async def test_a_slow_handler_gets_a_working_ack_then_the_answer(slack: FakeSlackApi) -> None:
    recorder = Recorder(delay=0.5)
    server = make_server(slack, recorder, answer_wait=0.05)
    response = await send(server, slash("approve triage-17", response_url=slack.response_url))
    assert response.json()["text"] == WORKING_TEXT  # acked before the handler was done
    await eventually(lambda: bool(slack.calls_to("response_url")))
    assert "1 of 2 approvals" in slack.calls_to("response_url")[0].params["text"]


async def test_approve_button_votes_once_per_double_click(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    server = make_server(slack, recorder)
    first = await send(server, click("loopbot_approve", action_ts="1700000100.000001"))
    second = await send(server, click("loopbot_approve", action_ts="1700000100.400001"))
    assert first.status_code == second.status_code == 200
    await eventually(lambda: len(recorder.replies) == 2 and len(slack.calls_to("chat.postEphemeral")) == 2)
    one, two = recorder.replies
    assert one.via == "button" and one.review_id == "triage-17"
    assert isinstance(one.command, Command) and one.command.decision is HumanDecision.APPROVE
    assert one.dedupe_key == two.dedupe_key
    assert one.respond["thread_ts"] == "1700000001.000100"
    ephemeral = slack.calls_to("chat.postEphemeral")[0].params
    assert ephemeral["channel"] == "C0REVIEW" and ephemeral["user"] == "U0AAA"
    assert ephemeral["thread_ts"] == "1700000001.000100"
    texts = [c.params["text"] for c in slack.calls_to("chat.postEphemeral")]
    assert texts.count("Already counted.") == 1, texts  # the answers are sent concurrently: either may land first


def test_click_keys_share_a_key_only_within_the_window() -> None:
    now = [0.0]
    keys = ClickKeys(window=10, clock=lambda: now[0])
    first = keys.key("C", "1.1", "U", "loopbot_pause", "100.1")
    now[0] = 0.5
    assert keys.key("C", "1.1", "U", "loopbot_pause", "100.6") == first
    assert keys.key("C", "1.1", "U", "loopbot_approve", "100.7") != first
    now[0] = 3600
    assert keys.key("C", "1.1", "U", "loopbot_pause", "3700.0") != first


@pytest.mark.parametrize(("action_id", "callback_id"), [("loopbot_reject", "loopbot_reject"),
                                                        ("loopbot_modify", "loopbot_modify")])
async def test_reject_and_modify_buttons_open_a_modal(slack: FakeSlackApi, action_id: str, callback_id: str) -> None:
    recorder = Recorder()
    response = await send(make_server(slack, recorder), click(action_id))
    assert response.status_code == 200
    await eventually(lambda: bool(slack.calls_to("views.open")))
    (opened,) = slack.calls_to("views.open")
    assert opened.params["trigger_id"] == "111.222.abc"
    view = opened.params["view"]
    view = json.loads(view) if isinstance(view, str) else view
    assert view["callback_id"] == callback_id
    assert json.loads(view["private_metadata"])["review_id"] == "triage-17"
    assert recorder.replies == []


async def test_modal_with_bad_changes_shows_errors_and_casts_no_vote(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    server = make_server(slack, recorder)
    response = await send(server, submission("loopbot_modify", "changes", "colour=blue"))
    assert response.status_code == 200
    body = response.json()
    assert body["response_action"] == "errors" and "colour" in body["errors"]["changes"]
    response = await send(server, submission("loopbot_reject", "reason", "   "))
    assert response.json()["response_action"] == "errors" and "reason" in response.json()["errors"]["reason"]
    await asyncio.sleep(0.1)
    assert recorder.replies == []


async def test_modal_with_good_changes_votes(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    response = await send(make_server(slack, recorder),
                          submission("loopbot_modify", "changes", "context.limit=5\nstep.description=Only bugs"))
    assert response.status_code == 200 and not response.content
    await eventually(lambda: bool(recorder.replies) and bool(slack.calls_to("chat.postEphemeral")))
    (reply,) = recorder.replies
    assert isinstance(reply.command, Command) and reply.command.decision is HumanDecision.MODIFY
    assert reply.command.modifications == {"context": {"limit": 5}, "step": {"description": "Only bugs"}}
    assert reply.review_id == "triage-17" and reply.via == "modal"


async def test_reject_modal_votes_with_the_reason(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    await send(make_server(slack, recorder), submission("loopbot_reject", "reason", "labels are wrong"))
    await eventually(lambda: bool(recorder.replies))
    assert recorder.replies[0].command == Command(HumanDecision.REJECT, "triage-17", "labels are wrong")


async def test_mention_in_a_thread_names_the_thread_and_a_retry_counts_once(slack: FakeSlackApi) -> None:
    recorder = Recorder()
    server = make_server(slack, recorder)
    first = await send(server, mention("<@U0BOT> approve ship it"), json_body=True)
    assert first.status_code == 200
    await eventually(lambda: len(slack.calls_to("chat.postEphemeral")) == 1)
    retry = await send(server, mention("<@U0BOT> approve ship it"), json_body=True,
                       **{"x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout"})
    assert retry.status_code == 200
    await asyncio.sleep(0.1)
    (one,) = recorder.replies  # the retry was known to this process: not even handed over
    assert one.context == {"channel": "C0REVIEW", "thread_ts": "1700000001.000100"}
    assert one.review_id is None and one.via == "mention"
    assert isinstance(one.command, Command) and one.command.argument == "ship it"
    assert one.dedupe_key == "slack:event:Ev0001"  # the store's key, for a retry that reaches another process
    (answered,) = slack.calls_to("chat.postEphemeral")
    assert answered.params["thread_ts"] == "1700000001.000100"
    (reacted,) = slack.calls_to("reactions.add")
    assert {k: reacted.params[k] for k in ("channel", "timestamp", "name")} == {
        "channel": "C0REVIEW", "timestamp": "1700000050.000100", "name": "white_check_mark"}


@pytest.mark.parametrize("tamper", ["secret", "stale", "future", "body"])
async def test_bad_signatures_are_401_and_never_reach_the_handler(slack: FakeSlackApi, tamper: str) -> None:
    recorder = Recorder()
    server = make_server(slack, recorder)
    body = slash("approve triage-17")
    now = int(time.time())  # "future" is a minute beyond the 5-minute window: busy cores may take seconds to ask
    headers = signed_headers(SECRET if tamper != "secret" else "wrong-secret", body,
                             timestamp={"stale": now - 301, "future": now + 360}.get(tamper, now))
    if tamper == "body":
        body = slash("reject triage-17 because")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://slack.test") as http:
        response = await http.post("/slack/events", content=body, headers=headers)
    assert response.status_code == 401
    await asyncio.sleep(0.05)
    assert recorder.replies == []


async def test_a_mention_in_a_posted_review_thread_matches_its_ref(slack: FakeSlackApi) -> None:
    from adapters.channel import Target
    from adapters.slack.channel import SlackChannel
    from adapters.slack.client import SlackClient
    from tests.adapters.slack.conftest import make_post

    ref = SlackChannel(SlackClient(BOT_TOKEN, base_url=slack.base_url)).post_request(
        Target("slack", channel="C0REVIEW"), make_post())
    recorder = Recorder()
    await send(make_server(slack, recorder), mention("<@U0BOT> lgtm", thread_ts=ref.data["thread_ts"]),
               json_body=True)
    await eventually(lambda: bool(recorder.replies))
    context = recorder.replies[0].context
    assert context is not None and ref.matches(context)


def test_seen_events_claim_once_release_on_failure_and_stay_bounded() -> None:
    seen = SeenEvents(size=2)
    assert seen.claim("Ev1") and not seen.claim("Ev1")
    seen.release("Ev1")
    assert seen.claim("Ev1")
    assert seen.claim("Ev2") and seen.claim("Ev3")
    assert seen.claim("Ev1")  # the oldest was forgotten


async def test_a_mention_whose_handling_failed_is_handled_on_retry(slack: FakeSlackApi) -> None:
    calls: list[Reply] = []

    def flaky(reply: Reply) -> Answer:
        calls.append(reply)
        if len(calls) == 1:
            raise RuntimeError("store unavailable")
        return Answer(AnswerKind.COUNTED, "counted", None)

    app = build_app(signing_secret=SECRET, handler=one_by_one(flaky), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    server = Starlette(routes=[slack_route(app, signing_secret=SECRET)])
    await send(server, mention("<@U0BOT> approve"), json_body=True)
    await eventually(lambda: len(calls) == 1)
    await asyncio.sleep(0.05)
    await send(server, mention("<@U0BOT> approve"), json_body=True, **{"x-slack-retry-num": "1"})
    await eventually(lambda: len(calls) == 2 and bool(slack.calls_to("chat.postEphemeral")))


# --- an acknowledged vote is a stored vote ---------------------------------------------------------------
class Ordered:
    """A handler that takes ``delay`` seconds to store a vote and notes when it is stored."""

    def __init__(self, delay: float = 0.2) -> None:
        self.delay = delay
        self.events: list[str] = []

    def __call__(self, reply: Reply) -> Answer:
        time.sleep(self.delay)
        self.events.append(f"stored {reply.via}")
        return Answer(AnswerKind.COUNTED, "counted: 1 of 2 approvals", reply.review_id)


@pytest.mark.parametrize(("body", "json_body", "via"), [
    (click("loopbot_approve"), False, "button"),
    (mention("<@U0BOT> approve"), True, "mention"),
    (submission("loopbot_reject", "reason", "no"), False, "modal"),
    (slash("approve triage-17"), False, "slash"),
])
async def test_every_vote_is_acked_only_once_it_is_stored(slack: FakeSlackApi, body: str, json_body: bool,
                                                          via: str) -> None:
    handler = Ordered()
    app = build_app(signing_secret=SECRET, handler=one_by_one(handler), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    response = await send(Starlette(routes=[slack_route(app, signing_secret=SECRET)]), body, json_body=json_body)
    handler.events.append("acked")
    assert response.status_code == 200
    assert handler.events == [f"stored {via}", "acked"]  # a crash after the 200 loses nothing


def _failing(reply: Reply) -> Answer:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(("body", "json_body"), [(click("loopbot_approve"), False),
                                                 (mention("<@U0BOT> approve"), True)])
async def test_a_vote_that_could_not_be_stored_is_answered_not_recorded(slack: FakeSlackApi, body: str,
                                                                        json_body: bool) -> None:
    app = build_app(signing_secret=SECRET, handler=one_by_one(_failing), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    response = await send(Starlette(routes=[slack_route(app, signing_secret=SECRET)]), body, json_body=json_body)
    assert response.status_code == 200
    await eventually(lambda: bool(slack.calls_to("chat.postEphemeral")))
    (told,) = slack.calls_to("chat.postEphemeral")
    assert told.params["text"] == NOT_RECORDED_TEXT and told.params["user"] == "U0AAA"
    assert not slack.calls_to("reactions.add")


async def test_a_slash_vote_or_a_modal_that_could_not_be_stored_says_so_in_the_ack(slack: FakeSlackApi) -> None:
    app = build_app(signing_secret=SECRET, handler=one_by_one(_failing), bot_token=BOT_TOKEN,
                    api_base_url=slack.base_url)
    server = Starlette(routes=[slack_route(app, signing_secret=SECRET)])
    answered = await send(server, slash("approve triage-17"))
    assert answered.status_code == 200 and answered.json()["text"] == NOT_RECORDED_TEXT
    modal = await send(server, submission("loopbot_reject", "reason", "labels are wrong"))
    assert modal.json() == {"response_action": "errors", "errors": {"reason": NOT_RECORDED_TEXT}}  # stays open


# --- bots and forged forms ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fields", [{"bot_id": "B0OTHER"}, {"bot_id": "B0OTHER", "subtype": "bot_message"},
                                    {"subtype": "bot_message"}])
async def test_a_mention_written_by_a_bot_is_no_vote(slack: FakeSlackApi, fields: dict[str, str]) -> None:
    recorder = Recorder()
    event = json.loads(mention("<@U0BOT> approve"))
    event["event"].update(fields)
    response = await send(make_server(slack, recorder), json.dumps(event), json_body=True)
    assert response.status_code == 200
    human = await send(make_server(slack, recorder), mention("<@U0BOT> approve", event_id="Ev0002"), json_body=True)
    assert human.status_code == 200
    await eventually(lambda: bool(slack.calls_to("chat.postEphemeral")))
    assert [reply.dedupe_key for reply in recorder.replies] == ["slack:event:Ev0002"]  # only the person's


@pytest.mark.parametrize("metadata", ["", "not json", "[1, 2]", '"triage-17"', '{"review_id": ""}',
                                      '{"review_id": 17}', '{"review_id": "triage-17", "admin": "yes"}'])
async def test_a_submission_whose_details_loopbot_did_not_write_gets_a_clear_answer(slack: FakeSlackApi,
                                                                                    metadata: str) -> None:
    recorder = Recorder()
    payload = json.loads(unquote(submission("loopbot_reject", "reason", "no").removeprefix("payload=")))
    payload["view"]["private_metadata"] = metadata
    response = await send(make_server(slack, recorder), interactive(payload))
    assert response.status_code == 200, response.text
    assert response.json() == {"response_action": "errors", "errors": {"reason": FOREIGN_MODAL_TEXT}}
    assert recorder.replies == []
