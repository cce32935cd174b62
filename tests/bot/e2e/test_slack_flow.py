"""Slack end to end: a real ``loopbot serve``, the fake Slack Web API, requests signed as Slack signs them.

Each test starts the demo loop (run on start), waits for its review to land
in the run's Slack thread, answers it one way - slash command, button,
@-mention, reject modal, Socket Mode - and follows the answer through the
one vote path to the run's end and back into Slack (the review message
re-rendered without buttons, a thread reply for the outcome and one for the
run's end).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapters.slack.channel import EVENT_REVIEW
from tests.fakes.slack_api import FakeSlackApi, FakeSocketMode

from .conftest import wait_for
from .slack_support import CHANNEL, SlackDesk, desk, fake, slack_loop

pytestmark = pytest.mark.e2e
__all__ = ["desk", "fake"]  # the fixtures, imported for pytest


def _has_buttons(blocks: list[dict[str, Any]]) -> bool:
    return any(block.get("type") == "actions" for block in blocks)


def _assert_closed_in_slack(desk: SlackDesk, review: dict[str, Any], message: dict[str, Any], outcome: str,
                            run_status: str) -> None:
    """The review message lost its buttons and shows ``outcome``; the thread got the outcome and the run's end."""
    def updated() -> list[Any]:
        return [c for c in desk.fake.calls_to("chat.update")
                if c.params.get("ts") == message["ts"] and not _has_buttons(c.params.get("blocks") or [])]

    calls = wait_for(updated, timeout=10, what="the review message re-rendered without buttons")
    assert any(outcome in str(c.params.get("blocks")) for c in calls)

    def ended(texts: list[str]) -> list[str]:
        return [t for t in texts if t.startswith(f"Run {review['run']} {run_status}")]

    def said(texts: list[str]) -> list[str]:
        return [t for t in texts if t.startswith(outcome)]

    texts = wait_for(lambda: (lambda t: t if ended(t) and said(t) else None)(desk.updates(review["id"])),
                     timeout=10, what="thread replies for the outcome and the run's end")
    assert len(ended(texts)) == len(said(texts)) == 1, texts  # each once (other notes, e.g. the votes, may join)
    for reply in desk.tagged("loopbot_update", review_id=review["id"]):
        assert reply["thread_ts"] == message["thread_ts"]  # in the run's thread, not the channel


# --- 1. the slash command ------------------------------------------------------------------
def test_slash_approve_completes_the_run_and_closes_the_review_in_slack(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop())
    parent = desk.parent(review["run"])
    assert "thread_ts" not in desk.fake.calls_to("chat.postMessage")[0].params  # the run's parent, top level
    assert message["thread_ts"] == parent["ts"]
    assert message["metadata"] == {"event_type": EVENT_REVIEW,
                                   "event_payload": {"review_id": review["id"], "run_id": review["run"]}}
    assert _has_buttons(message["blocks"])

    started = time.monotonic()
    response = desk.slash(f"approve {review['id']} looks right")
    assert response.status_code == 200 and time.monotonic() - started < 3  # Slack's ack budget
    assert response.json()["response_type"] == "ephemeral"
    assert response.json()["text"].startswith("decided: approve by slack:U0AAA"), response.json()

    desk.ws.wait_run(review["run"], "completed")
    _assert_closed_in_slack(desk, review, message, "Approved by <@U0AAA>", "completed")
    assert [v["voter"] for v in desk.votes(review["id"])] == ["slack:U0AAA"]


# --- 2. buttons, @-mention, the reject modal, Socket Mode -------------------------------------
def test_approve_button_completes_the_run(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop())
    response = desk.click("loopbot_approve", message, review["id"], user="U0BBB")
    assert response.status_code == 200  # acked first; the answer follows as an ephemeral message
    said = wait_for(lambda: desk.ephemerals("U0BBB"), timeout=10, what="the clicker's answer")
    assert said[0].startswith("decided: approve by slack:U0BBB")
    ephemeral = desk.fake.calls_to("chat.postEphemeral")[0].params
    assert ephemeral["channel"] == CHANNEL and ephemeral["thread_ts"] == message["thread_ts"]
    desk.ws.wait_run(review["run"], "completed")
    _assert_closed_in_slack(desk, review, message, "Approved by <@U0BBB>", "completed")


def test_mention_in_the_thread_needs_no_review_id(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop())
    response = desk.mention("<@U0BOT> approve ship it", thread_ts=message["thread_ts"])
    assert response.status_code == 200
    wait_for(lambda: desk.fake.calls_to("reactions.add"), timeout=10, what="a reaction on the counted mention")
    assert desk.ephemerals("U0AAA")[0].startswith("decided: approve by slack:U0AAA")
    desk.ws.wait_run(review["run"], "completed")
    _assert_closed_in_slack(desk, review, message, "Approved by <@U0AAA>", "completed")
    (vote,) = desk.votes(review["id"])
    assert vote["feedback"] == "ship it"


def test_reject_modal_with_a_reason_ends_the_run(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop())
    assert desk.click("loopbot_reject", message, review["id"]).status_code == 200
    opened = wait_for(lambda: desk.fake.calls_to("views.open"), timeout=10, what="the reject modal to open")
    view = opened[0].params["view"]
    assert view["callback_id"] == "loopbot_reject"
    assert desk.votes(review["id"]) == []  # opening the modal is no vote

    submitted = desk.send(desk.interactive(desk.submission_payload(view, "labels are wrong for #2")))
    assert submitted.status_code == 200 and submitted.content in (b"", b"{}")  # the modal closes
    desk.ws.wait_run(review["run"], "rejected")
    (vote,) = desk.votes(review["id"])
    assert vote["decision"] == "reject" and vote["feedback"] == "labels are wrong for #2"
    _assert_closed_in_slack(desk, review, message, "Rejected by <@U0AAA>: labels are wrong for #2", "rejected")


def test_socket_mode_takes_a_slash_command(desk: SlackDesk, fake: FakeSlackApi) -> None:
    socket = FakeSocketMode().start()
    try:
        fake.socket_url = socket.url
        desk.configure(slack_loop(), socket_mode=True)
        bot = desk.serve()
        assert socket.connected.wait(10), bot.log()
        assert fake.calls_to("apps.connections.open")[0].token.startswith("xapp-")
        review = desk.ws.wait_open_review()
        message = desk.posted_review(review["id"])

        ack = socket.send("slash_commands", desk.slash_fields(f"approve {review['id']}"))
        assert ack["payload"]["text"].startswith("decided: approve by slack:U0AAA"), ack
        desk.ws.wait_run(review["run"], "completed")
        _assert_closed_in_slack(desk, review, message, "Approved by <@U0AAA>", "completed")
    finally:
        socket.stop()


# --- 3. N of M ----------------------------------------------------------------------------------
def test_two_of_two_slack_users_decide(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop(approvals=2))
    first = desk.slash(f"approve {review['id']}", user="U0AAA").json()["text"]
    assert "1 of 2" in first and desk.ws.run(review["run"])["status"] == "waiting"
    second = desk.click("loopbot_approve", message, review["id"], user="U0BBB")
    assert second.status_code == 200
    said = wait_for(lambda: desk.ephemerals("U0BBB"), timeout=10, what="the second voter's answer")
    assert said[0].startswith("decided: approve by slack:U0AAA, slack:U0BBB"), said
    desk.ws.wait_run(review["run"], "completed")
    _assert_closed_in_slack(desk, review, message, "Approved by <@U0AAA>, <@U0BBB>", "completed")


# --- 4. who may answer, replays, forged and stale requests ----------------------------------------
def test_refusals_replays_and_bad_signatures_leave_the_votes_alone(desk: SlackDesk) -> None:
    review, message = desk.open(slack_loop(approvals=2))
    rid = review["id"]

    refused = desk.slash(f"approve {rid}", user="U0CCC").json()["text"]
    assert refused.startswith("vote refused") and "U0CCC" in refused
    assert "U0AAA" in refused and "U0BBB" in refused, f"the refusal should say who may answer: {refused}"
    assert desk.votes(rid) == []

    # the same click delivered twice (a double click, or a redelivery) counts once
    click = desk.interactive(desk.click_payload("loopbot_approve", message, rid, action_ts="1800000000.000001"))
    assert desk.send(click).status_code == desk.send(click).status_code == 200
    said = wait_for(lambda: (lambda s: s if len(s) == 2 else None)(desk.ephemerals("U0AAA")), timeout=10,
                    what="both clicks answered")
    assert sorted("1 of 2" in text for text in said) == [False, True], said  # counted once; either may land first
    assert [v["voter"] for v in desk.votes(rid)] == ["slack:U0AAA"]

    # an Events API retry carries the first delivery's event_id: counted once, answered once
    body = desk.mention_body("<@U0BOT> reject not yet", thread_ts=message["thread_ts"], user="U0BBB",
                             event_id="Ev0REPLAYED")
    assert desk.send(body, json_body=True).status_code == 200
    wait_for(lambda: desk.ephemerals("U0BBB"), timeout=10, what="the mention's answer")
    retried = desk.send(body, json_body=True, **{"x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout"})
    assert retried.status_code == 200
    desk.ws.wait_run(review["run"], "rejected")
    before = desk.votes(rid)
    assert [v["voter"] for v in before] == ["slack:U0AAA", "slack:U0BBB"]
    wait_for(lambda: len(desk.fake.calls_to("reactions.add")) >= 1, what="the counted mention's reaction")
    assert len(desk.ephemerals("U0BBB")) == 1 and len(desk.fake.calls_to("reactions.add")) == 1

    # forged or stale: 401, no listener runs, nothing is recorded
    answered = len(desk.fake.calls_to("chat.postEphemeral"))
    stale = desk.send(desk.slash_body(f"approve {rid}", "U0BBB"), timestamp=int(time.time()) - 600)
    forged = desk.send(desk.slash_body(f"approve {rid}", "U0BBB"), secret="not-the-secret")
    unsigned = desk.http.post(desk.url, content=desk.slash_body(f"approve {rid}", "U0BBB"),
                              headers={"content-type": "application/x-www-form-urlencoded"})
    assert stale.status_code == forged.status_code == unsigned.status_code == 401
    assert desk.votes(rid) == before and len(desk.fake.calls_to("chat.postEphemeral")) == answered


# --- 5. Slack failing while a vote arrives ------------------------------------------------------
def test_slack_429_then_500_delays_the_post_not_the_vote(desk: SlackDesk, fake: FakeSlackApi) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=0, error="ratelimited")
    fake.fail("chat.postMessage", status=500)  # the outbox then backs off 2 s: long enough to see it failing
    desk.configure(slack_loop(approvals=2))
    desk.serve()
    review = desk.ws.wait_open_review()
    slack_key = f"slack:{CHANNEL}"

    def failing() -> dict[str, Any] | None:
        status = desk.ws.review(review["id"])
        views = {t["target"]: t for t in (status or {}).get("targets", [])}
        seen = views.get(slack_key)
        return views if seen and not seen["delivered"] and seen["attempts"] >= 1 and seen["error"] else None

    views = wait_for(failing, timeout=10, what="status to show the Slack target failing")
    assert views["local"]["delivered"] is True
    assert "rate-limited" in views[slack_key]["error"] or "HTTP 500" in views[slack_key]["error"]

    started = time.monotonic()
    acked = desk.slash(f"approve {review['id']}")
    assert acked.status_code == 200 and time.monotonic() - started < 2, "the vote waits for no Slack post"
    assert "1 of 2" in acked.json()["text"]

    message = desk.posted_review(review["id"], timeout=15)
    assert _has_buttons(message["blocks"])
    wait_for(lambda: (desk.ws.review(review["id"]) or {}).get("targets", [{}])[-1].get("delivered"), timeout=10,
             what="status to show the Slack target delivered")
    assert len(desk.tagged("loopbot_run", run_id=review["run"])) == 1
    assert len(desk.tagged(EVENT_REVIEW, review_id=review["id"])) == 1  # posted exactly once
    assert len(fake.calls_to("chat.postMessage")) == 4  # the parent: 429, 500, ok; then the review
    assert [v["voter"] for v in desk.votes(review["id"])] == ["slack:U0AAA"]
