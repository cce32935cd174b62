"""An answered Slack vote is a stored vote: ``loopbot serve`` killed (SIGKILL) right after answering a click or a
mention keeps it, and on a full disk every voter is told their vote was not recorded.

Real ``loopbot serve`` processes against the fake Slack Web API, requests
signed as Slack signs them. To make "right after the answer" a moment when a
vote that was acked too early is certainly not stored yet, the voter check
(``usergroups.users.list``) is held by the fake until the test lets it go:
a bot that answers before storing answers while it is held, and is killed then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import httpx
import pytest

from adapters.slack.listeners import NOT_RECORDED_TEXT
from tests.fakes.slack_api import FakeSlackApi

from ..tmpfs_support import fill, tmpfs
from .conftest import Bot, demo_loop, wait_for
from .slack_support import CHANNEL, SlackDesk, desk

pytestmark = pytest.mark.e2e
__all__ = ["desk"]  # the fixture, imported for pytest

GROUP = [f"U0G{n:02d}" for n in range(40)]
#: How long an answer may not come while the voter check is held (the bot's answer_wait is 2 s).
HELD = 1.0


@pytest.fixture
def fake() -> Iterator[FakeSlackApi]:
    with FakeSlackApi(usergroups={"S0OPS": GROUP}) as api:
        yield api


def _loop(approvals: int) -> dict[str, Any]:
    return demo_loop(run_on_start=True, review={
        "post_to": [{"slack": {"channel": CHANNEL}}],
        "reviewers": {"slack_groups": ["S0OPS"]},
        "approvals_required": approvals,
    })


def _answer_then_kill(desk: SlackDesk, bot: Bot, send: Callable[[], httpx.Response]) -> httpx.Response:
    """Send a vote whose voter check is held; SIGKILL the bot the moment its answer arrives."""
    release = desk.fake.stall("usergroups.users.list")
    asked = len(desk.fake.calls_to("usergroups.users.list"))
    with ThreadPoolExecutor(1) as pool:
        sent = pool.submit(send)
        wait_for(lambda: len(desk.fake.calls_to("usergroups.users.list")) > asked, timeout=10,
                 what="the bot to check the voter")
        try:
            answer = sent.result(timeout=HELD)  # answered while the vote cannot be stored yet
        except FutureTimeout:
            release.set()
            answer = sent.result(timeout=10)
        bot.kill9()
        release.set()
    return answer


def test_a_serve_killed_right_after_answering_a_click_or_a_mention_has_stored_the_vote(desk: SlackDesk) -> None:
    desk.configure(_loop(approvals=3))
    bot = desk.serve()
    review = desk.ws.wait_open_review()
    rid = review["id"]
    message = desk.posted_review(rid)

    clicked = _answer_then_kill(desk, bot, lambda: desk.click("loopbot_approve", message, rid, user=GROUP[0]))
    assert clicked.status_code == 200
    assert [v["voter"] for v in desk.votes(rid)] == [f"slack:{GROUP[0]}"], "the answered click was lost"

    bot = desk.serve()  # a fresh process: the group is asked of Slack again
    mentioned = _answer_then_kill(desk, bot, lambda: desk.mention("<@U0BOT> approve", message["thread_ts"],
                                                                  user=GROUP[1]))
    assert mentioned.status_code == 200
    assert [v["voter"] for v in desk.votes(rid)] == [f"slack:{GROUP[0]}", f"slack:{GROUP[1]}"], (
        "the answered mention was lost")


def test_on_a_full_disk_every_voter_is_told_whether_the_vote_was_recorded(desk: SlackDesk) -> None:
    with tmpfs(desk.ws.state_dir, "16m"):
        desk.configure(_loop(approvals=len(GROUP)))
        bot = desk.serve()
        review = desk.ws.wait_open_review()
        rid = review["id"]
        message = desk.posted_review(rid)
        filler = fill(desk.ws.state_dir)
        unhealthy = bot.healthz()
        assert unhealthy.status_code == 503 and "full disk" in unhealthy.json()["error"], unhealthy.text

        # a vote bigger than any page a file has left: certainly not stored, and the voter is told so
        big = "x" * 5_000
        slash = desk.slash(f"approve {rid} {big}", user=GROUP[0])
        assert slash.status_code == 200 and slash.json()["text"] == NOT_RECORDED_TEXT, slash.text
        mention = desk.mention(f"<@U0BOT> approve {big}", message["thread_ts"], user=GROUP[1])
        assert mention.status_code == 200
        assert wait_for(lambda: desk.ephemerals(GROUP[1]), timeout=10, what="the mention's answer") == [
            NOT_RECORDED_TEXT]
        assert not desk.fake.calls_to("reactions.add")

        # clicks are small: a few may fit in what the journal's last page has left; each one is either stored
        # and answered as counted, or not stored and answered "not recorded"
        told_not_recorded = None
        for user in GROUP[2:]:
            assert desk.click("loopbot_approve", message, rid, user=user).status_code == 200
            (said,) = wait_for(lambda u=user: desk.ephemerals(u), timeout=10, what=f"{user}'s answer")
            if said == NOT_RECORDED_TEXT:
                told_not_recorded = user
                break
            assert "recorded" in said and "of 40 needed" in said, said
        assert told_not_recorded is not None, "the disk never filled up"
        filler.unlink()
        stored = [v["voter"] for v in desk.votes(rid)]
        counted = GROUP[2:GROUP.index(told_not_recorded)]
        assert stored == [f"slack:{user}" for user in counted], stored  # exactly the ones told "recorded"

        again = desk.click("loopbot_approve", message, rid, user=told_not_recorded)  # trying again works
        assert again.status_code == 200
        wait_for(lambda: len(desk.ephemerals(told_not_recorded)) == 2, timeout=10, what="the second answer")
        assert "recorded" in desk.ephemerals(told_not_recorded)[1]
        assert f"slack:{told_not_recorded}" in [v["voter"] for v in desk.votes(rid)]
        wait_for(lambda: bot.healthz().status_code == 200, timeout=10, what="/healthz to recover")
        bot.terminate()
