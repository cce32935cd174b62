"""Slack end to end with content too big for one message: a 5,000-row proposal, a 3,500-character reason.

A real ``loopbot serve`` posts to the fake Slack, which refuses what Slack
refuses (and fails the test on leaving if it refused anything): the
proposal must be readable whole from the thread, the outcome must land in
the review message, and the reason whole in the thread.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from adapters.slack.channel import EVENT_UPDATE

from .big_proposal_loop import row
from .conftest import wait_for
from .slack_support import CHANNEL, SlackDesk, desk, fake, slack_loop

pytestmark = pytest.mark.e2e
__all__ = ["desk", "fake"]  # the fixtures, imported for pytest


def big_loop(rows: int) -> dict[str, Any]:
    return {
        "name": "big", "factory": "tests.bot.e2e.big_proposal_loop:build", "run_on_start": True,
        "options": {"rows": rows},
        "review": {"post_to": [{"slack": {"channel": CHANNEL}}], "reviewers": {"slack_users": ["U0AAA"]}},
    }


def _texts(message: dict[str, Any]) -> str:
    return "\n".join(str(block.get("text", {}).get("text", "")) for block in message.get("blocks") or [])


def test_a_5000_row_proposal_is_read_whole_in_slack_and_the_run_end_is_the_loops_summary(desk: SlackDesk) -> None:
    desk.configure(big_loop(5000))
    desk.serve()
    review = desk.ws.wait_open_review(loop="big", timeout=30)
    message = desk.posted_review(review["id"], timeout=30)
    shown = _texts(message)
    assert shown.index("*Approve to apply 5,000 label changes to octo/ops*") < shown.index("*Who can answer:*")
    assert "#0     Crash on start, case 0" in shown and "(5,000 table rows in all)" in shown
    assert "local-reviews" not in str(message["blocks"]) and "state directory" not in str(message["blocks"])

    files = wait_for(lambda: (lambda f: f if len(f) == 2 else None)(desk.fake.uploaded(CHANNEL)), timeout=30,
                     what="the whole proposal uploaded to the thread")
    assert {f["thread_ts"] for f in files} == {message["thread_ts"]}
    table = next(f["text"] for f in files if f["filename"].endswith(".csv"))
    assert list(csv.reader(io.StringIO(table))) == [["issue", "title", "labels"], *(row(n) for n in range(5000))]
    markdown = next(f["text"] for f in files if f["filename"].endswith(".md"))
    assert all(f"| #{n} | Crash on start, case {n} | add P1 |" in markdown for n in range(5000))

    assert desk.slash(f"approve {review['id']}").status_code == 200
    desk.ws.wait_run(review["run"], "completed", timeout=30)
    ended = wait_for(lambda: [t for t in desk.updates(review["id"]) if t.startswith(f"Run {review['run']} completed")],
                     timeout=15, what="the run's end in the thread")
    assert "Applied 5,000 label changes to octo/ops" in ended[0] and "output:" not in ended[0]


def test_a_3500_character_reject_reason_shows_the_outcome_and_the_whole_reason_in_the_thread(
    desk: SlackDesk,
) -> None:
    desk.configure(slack_loop())
    desk.serve()
    review = desk.ws.wait_open_review()
    message = desk.posted_review(review["id"])
    reason = "<" * 800 + " then " + "r" * 2694  # 3,500 characters; each "<" is four once escaped
    assert desk.slash(f"reject {review['id']} {reason}").status_code == 200
    desk.ws.wait_run(review["run"], "rejected")

    def closed() -> dict[str, Any] | None:
        now = next(m for m in desk.fake.channel_messages(CHANNEL) if m["ts"] == message["ts"])
        return now if not any(b["type"] == "actions" for b in now["blocks"]) else None

    review_now = wait_for(closed, timeout=15, what="the review message without its buttons")
    outcome = review_now["blocks"][1]["text"]["text"]
    assert outcome.startswith("Rejected by <@U0AAA>: &lt;&lt;") and "…" in outcome
    assert "waiting" not in _texts(review_now).lower()

    def whole() -> str | None:
        said = "".join(_texts(m) for m in desk.tagged(EVENT_UPDATE, review_id=review["id"]))
        return said if "r" * 2694 in said and f"Run {review['run']} rejected" in said else None

    said = wait_for(whole, timeout=15, what="the whole reason and the run's end in the thread")
    assert "&lt;" * 800 + " then " in said.replace("\n", "")  # split over sections, nothing lost
    assert not desk.fake.refused
