"""Slack end to end, the rest of the ways in: the Modify modal, Pause, user groups, Socket Mode clicks and mentions,
and a ``loopbot serve`` killed right after posting a review.

Real ``loopbot serve`` processes against the fake Slack Web API (and the
fake Socket Mode endpoint), requests signed as Slack signs them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.channel import EVENT_REVIEW
from bot.store import SqliteStore
from tests.fakes.slack_api import FakeSlackApi, FakeSocketMode

from .conftest import Workspace, demo_loop, wait_for
from .slack_support import CHANNEL, SlackDesk, desk, slack_loop

pytestmark = pytest.mark.e2e
__all__ = ["desk"]  # the fixture, imported for pytest


@pytest.fixture
def fake() -> Iterator[FakeSlackApi]:
    with FakeSlackApi(usergroups={"S0OPS": ["U0GRP"]}) as api:
        yield api


def _submit_changes(desk: SlackDesk, view: dict[str, Any], changes: str, user: str = "U0AAA") -> Any:
    payload = desk.submission_payload(view, "", user)
    payload["view"]["id"] = "V0MODIFY"  # one modal, submitted again after its errors: Slack keeps its id
    payload["view"]["state"] = {"values": {"changes": {"value": {"type": "plain_text_input", "value": changes}}}}
    return desk.send(desk.interactive(payload))


def _context_of(ws: Workspace, run_id: str) -> dict[str, Any]:
    snapshot = SqliteStore(Path(ws.state_dir)).load_snapshot(run_id) or {}
    return dict((snapshot.get("context") or {}).get("initial_context") or {})


# --- the Modify modal ----------------------------------------------------------------------------
def test_modify_modal_shows_bad_changes_as_errors_and_good_ones_reach_the_run(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop())
    rid = review["id"]
    assert desk.click("loopbot_modify", message, rid).status_code == 200
    view = wait_for(lambda: desk.fake.calls_to("views.open"), timeout=10, what="the modify modal")[0].params["view"]
    assert view["callback_id"] == "loopbot_modify"

    for bad, said in (("note=x", "context."), ("", "at least one change"),
                      ('plan.skip=["nope"]', "nope")):
        answer = _submit_changes(desk, view, bad)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["response_action"] == "errors" and said in body["errors"]["changes"], (bad, body)
    assert desk.votes(rid) == [] and desk.ws.review(rid)["status"] == "open"  # nothing counted

    answer = _submit_changes(desk, view, "context.note=ship it\ncontext.reviewed=true")
    assert answer.status_code == 200 and answer.content in (b"", b"{}"), answer.text  # the modal closes
    desk.ws.wait_run(review["run"], "completed")
    (vote,) = desk.votes(rid)
    assert vote["decision"] == "modify" and vote["modifications"] == {"context": {"note": "ship it",
                                                                                 "reviewed": True}}
    context = _context_of(desk.ws, review["run"])
    assert context["note"] == "ship it" and context["reviewed"] is True, context
    said = wait_for(lambda: desk.ephemerals("U0AAA"), timeout=10, what="the modifier's answer")
    assert said[-1].startswith("decided: modify by slack:U0AAA"), said


# --- Pause --------------------------------------------------------------------------------------
def test_pause_button_keeps_the_review_open_and_silences_its_reminders(desk: SlackDesk) -> None:
    timeout = {"remind_after": "3s"}
    paused_loop = slack_loop()
    paused_loop["review"]["timeout"] = timeout
    control = demo_loop("control", run_on_start=True, review={
        "post_to": [{"slack": {"channel": CHANNEL}}], "reviewers": {"slack_users": ["U0AAA"]}, "timeout": timeout})
    desk.ws.write_config([paused_loop, control], slack={"bot_token": "xoxb-test", "api_base_url": desk.fake.base_url,
                                                         "signing_secret": "e2e-signing-secret"})
    desk.serve()
    review = desk.ws.wait_open_review()
    other = desk.ws.wait_open_review("control")
    message = desk.posted_review(review["id"])

    assert desk.click("loopbot_pause", message, review["id"]).status_code == 200
    said = wait_for(lambda: desk.ephemerals("U0AAA"), timeout=10, what="the pauser's answer")
    assert "paused" in said[0].lower(), said
    status = desk.ws.review(review["id"])
    assert status["status"] == "open" and desk.ws.run(review["run"])["status"] == "waiting"
    stored = SqliteStore(Path(desk.ws.state_dir)).get_review(review["id"])
    assert stored.paused_until is not None and stored.paused_until > datetime.now(stored.paused_until.tzinfo)

    # the unpaused control review, due at the same time, is reminded; the paused one is not
    wait_for(lambda: [t for t in desk.updates(other["id"]) if t.startswith("Reminder")], timeout=15,
             what="the control review's reminder")
    due = datetime.fromisoformat(review["created_at"]).timestamp() + 3
    wait_for(lambda: datetime.now().timestamp() > due + 1.5, timeout=10, what="the paused review's reminder time")
    assert not [t for t in desk.updates(review["id"]) if t.startswith("Reminder")], desk.updates(review["id"])
    assert desk.ws.review(review["id"])["status"] == "open"


# --- reviewers.slack_groups ---------------------------------------------------------------------
def test_a_user_group_member_may_answer_and_an_outsider_may_not(desk: SlackDesk) -> None:
    loop = slack_loop(approvals=1)
    loop["review"]["reviewers"] = {"slack_groups": ["S0OPS"]}
    review, _ = desk.open(loop)
    refused = desk.slash(f"approve {review['id']}", user="U0OUT").json()["text"]
    assert refused.startswith("vote refused") and "U0OUT" in refused, refused
    assert desk.votes(review["id"]) == []
    asked = [c.params.get("usergroup") for c in desk.fake.calls_to("usergroups.users.list")]
    assert asked and set(asked) == {"S0OPS"}

    admitted = desk.slash(f"approve {review['id']}", user="U0GRP").json()["text"]
    assert admitted.startswith("decided: approve by slack:U0GRP"), admitted
    desk.ws.wait_run(review["run"], "completed")


# --- no reviewers block: the review channel's members -------------------------------------------------
def test_without_reviewers_only_the_review_channels_members_may_answer_and_bots_never(desk: SlackDesk) -> None:
    desk.fake.members[CHANNEL] = ["U0AAA", "U0BBB"]
    desk.fake.members["C0ELSE"] = ["U0OUT"]
    loop = slack_loop(approvals=1)
    del loop["review"]["reviewers"]
    review, message = desk.open(loop)
    rid = review["id"]
    refused = desk.slash(f"approve {rid}", user="U0OUT").json()["text"]  # a workspace member, not in #C0AAA
    assert refused.startswith("vote refused") and f"not a member of channel {CHANNEL}" in refused, refused
    typo = desk.slash(f"approve {rid}0", user="U0OUT").json()["text"]
    assert rid not in typo.replace(f"{rid}0", ""), typo  # no review id for someone who may not answer it
    asked = desk.fake.calls_to("conversations.members")
    assert asked and {c.params["channel"] for c in asked} == {CHANNEL}

    bot_body = json.loads(desk.mention_body("<@U0BOT> approve", message["thread_ts"], user="U0BBB"))
    bot_body["event"]["bot_id"] = "B0OTHER"  # another app's bot, posting as a member of the channel
    assert desk.send(json.dumps(bot_body), json_body=True).status_code == 200
    assert desk.votes(rid) == [] and desk.ws.review(rid)["status"] == "open"

    forged = desk.submission_payload({"callback_id": "loopbot_reject", "private_metadata": "v2:opaque"}, "no",
                                     user="U0BBB")  # a form whose details loopbot did not write
    answered = desk.send(desk.interactive(forged))
    assert answered.status_code == 200 and answered.json()["response_action"] == "errors", answered.text
    assert "not opened by loopbot" in answered.json()["errors"]["reason"]
    assert desk.bot is not None and "Traceback" not in desk.bot.log()

    assert desk.click("loopbot_approve", message, rid, user="U0BBB").status_code == 200
    desk.ws.wait_run(review["run"], "completed")
    assert [v["voter"] for v in desk.votes(rid)] == ["slack:U0BBB"]


# --- Socket Mode: a button and an @-mention ---------------------------------------------------------
def test_socket_mode_takes_a_button_click_and_a_mention(desk: SlackDesk, fake: FakeSlackApi) -> None:
    socket = FakeSocketMode().start()
    try:
        fake.socket_url = socket.url
        desk.configure(slack_loop(approvals=2), socket_mode=True)
        bot = desk.serve()
        assert socket.connected.wait(10), bot.log()
        review = desk.ws.wait_open_review()
        message = desk.posted_review(review["id"])

        click = desk.click_payload("loopbot_approve", message, review["id"], user="U0AAA")
        assert socket.send("interactive", click)["envelope_id"]
        said = wait_for(lambda: desk.ephemerals("U0AAA"), timeout=10, what="the clicker's answer")
        assert "1 of 2" in said[0], said

        mention = json.loads(desk.mention_body("<@U0BOT> approve fine by me", message["thread_ts"], user="U0BBB"))
        assert socket.send("events_api", mention)["envelope_id"]
        desk.ws.wait_run(review["run"], "completed")
        wait_for(lambda: desk.fake.calls_to("reactions.add"), timeout=10, what="a reaction on the counted mention")
        assert [v["voter"] for v in desk.votes(review["id"])] == ["slack:U0AAA", "slack:U0BBB"]
        assert desk.votes(review["id"])[1]["feedback"] == "fine by me"
    finally:
        socket.stop()


# --- a crash right after posting ----------------------------------------------------------------
def test_a_serve_killed_right_after_posting_finds_its_own_message_after_restart(desk: SlackDesk,
                                                                                 fake: FakeSlackApi) -> None:
    release = fake.stall("chat.postMessage", skip=1)  # the run's parent answers; the review's post hangs
    desk.configure(slack_loop())
    first = desk.serve()
    review = desk.ws.wait_open_review()
    wait_for(lambda: desk.tagged(EVENT_REVIEW, review_id=review["id"]), timeout=15,
             what="the review posted in Slack (its answer held back)")
    first.kill9()
    release.set()
    assert not desk.ws.review(review["id"])["targets"][-1]["delivered"]  # the bot never heard back

    desk.serve()
    wait_for(lambda: (desk.ws.review(review["id"]) or {}).get("targets", [{}])[-1].get("delivered"), timeout=20,
             what="the restarted bot to record the Slack post as delivered")
    posts = [c for c in fake.calls_to("chat.postMessage")
             if (c.params.get("metadata") or {}).get("event_type") == EVENT_REVIEW]
    assert len(posts) == 1 and len(desk.tagged(EVENT_REVIEW, review_id=review["id"])) == 1
    (message,) = desk.tagged(EVENT_REVIEW, review_id=review["id"])

    answer = desk.slash(f"approve {review['id']}").json()["text"]
    assert answer.startswith("decided: approve"), answer
    desk.ws.wait_run(review["run"], "completed")
    wait_for(lambda: [c for c in fake.calls_to("chat.update") if c.params.get("ts") == message["ts"]], timeout=10,
             what="the one review message updated with the outcome")
