"""Run control end to end: start and cancel runs from Slack and GitHub against a real ``loopbot serve``.

`/loopbot run` by an operator starts a run whose thread is posted; anyone
else is refused. `/loopbot cancel` ends a waiting run (its review closed as
"cancelled by ...", the messages updated) and stops a running one at its
next step boundary (a step that blocks until the test releases it);
`/cancel` on the run's GitHub issue does the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.slack.channel import EVENT_RUN
from tests.fakes.github_api import FakeGitHub

from ..slow_loop import trail_lines
from .conftest import Workspace, demo_loop, slow_loop, wait_for
from .github_support import (
    ISSUE,
    REPOSITORY,
    comment_delivery,
    deliver,
    gh,
    replies_to,
    review_comment,
    serve_github,
)
from .slack_support import CHANNEL, SlackDesk, desk, fake

pytestmark = pytest.mark.e2e
__all__ = ["desk", "fake", "gh"]  # the fixtures, imported for pytest


def _slack_review(users: tuple[str, ...] = ("U0AAA", "U0BBB")) -> dict[str, object]:
    return {"post_to": [{"slack": {"channel": CHANNEL}}], "reviewers": {"slack_users": list(users)}}


def test_slash_run_by_an_operator_starts_a_run_anyone_else_is_refused(desk: SlackDesk) -> None:
    desk.configure(demo_loop(review=_slack_review()))  # not run on start: only the command starts it
    desk.serve()
    refused = desk.slash("run demo", user="U0CCC")
    assert refused.status_code == 200
    text = refused.json()["text"]
    assert "not started" in text and "<@U0AAA>, <@U0BBB>" in text and "operators of loop demo" in text, text
    assert desk.ws.status()["runs"] == []

    started = desk.slash("run demo", user="U0AAA")
    assert started.json()["text"].startswith("started run demo-run-1 of loop demo"), started.json()
    review = desk.ws.wait_open_review()
    assert review["run"] == "demo-run-1"
    desk.posted_review(review["id"])  # the run's thread, with its review
    assert desk.tagged(EVENT_RUN, run_id="demo-run-1")
    busy = desk.slash("run demo", user="U0BBB")
    assert "already has an active run: demo-run-1 is waiting on review demo-1" in busy.json()["text"]
    unknown = desk.slash("run dmeo", user="U0BBB")
    assert 'did you mean "demo"' in unknown.json()["text"]


def test_slash_cancel_of_a_waiting_run_closes_its_review_in_slack(desk: SlackDesk) -> None:
    desk.configure(demo_loop(run_on_start=True, review=_slack_review()))
    desk.serve()
    review = desk.ws.wait_open_review()
    desk.posted_review(review["id"])
    refused = desk.slash(f"cancel {review['run']} not you", user="U0CCC")
    assert "cancel refused" in refused.json()["text"]
    answer = desk.slash(f"cancel {review['run']} wrong week", user="U0BBB")
    assert answer.json()["text"].startswith(f"Run {review['run']} cancelled"), answer.json()
    run = desk.ws.wait_run(review["run"], "cancelled")
    assert run["reason"] == "cancelled by slack:U0BBB: wrong week"
    assert desk.ws.review(review["id"])["status"] == "cancelled"
    said = wait_for(lambda: [t for t in desk.updates(review["id"]) if "cancelled by slack:U0BBB" in t],
                    what="the thread told the run was cancelled")
    assert said[0].startswith(f"Run {review['run']} cancelled by slack:U0BBB: wrong week.")
    message = desk.posted_review(review["id"])

    def closed() -> list[object]:
        return [c for c in desk.fake.calls_to("chat.update") if c.params.get("ts") == message["ts"]
                and "(cancelled)" in str(c.params.get("blocks")) and "actions" not in str(c.params.get("blocks"))]

    wait_for(closed, what="the review message re-rendered as cancelled, without buttons")
    audit = (desk.ws.root / "state" / "runs-md" / f"{review['run']}.md").read_text()
    assert "cancelled by slack:U0BBB: wrong week" in audit


def test_slash_cancel_of_a_running_run_stops_it_at_its_next_step(desk: SlackDesk, tmp_path: Path) -> None:
    trail, gate = tmp_path / "trail", tmp_path / "gate"
    loop = slow_loop(trail, delay=0, gate=str(gate), steps=3)
    loop["review"] = _slack_review()
    desk.configure(loop)
    desk.serve()
    wait_for(lambda: trail_lines(trail), what="step 1 started")
    answer = desk.slash("cancel slow-run-1 stop it", user="U0AAA")
    assert "stops at its next step boundary" in answer.json()["text"], answer.json()
    assert desk.ws.run("slow-run-1")["status"] == "running"
    gate.touch()
    run = desk.ws.wait_run("slow-run-1", "cancelled")
    assert run["reason"] == "cancelled by slack:U0AAA: stop it"
    assert [line.split()[:2] for line in trail_lines(trail)] == [["start", "step_1"], ["done", "step_1"]]


def test_slash_loops_lists_each_loop(desk: SlackDesk) -> None:
    desk.configure(demo_loop(review=_slack_review(), schedule={"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}))
    desk.serve()
    text = desk.slash("loops", user="U0CCC").json()["text"]
    assert "demo: at 09:00, Monday to Friday (Europe/Berlin); next " in text and "never run yet" in text, text


def test_cancel_comment_on_the_runs_issue_cancels_it(ws: Workspace, gh: FakeGitHub) -> None:
    bot, review, _ = serve_github(ws, gh)
    outsider = gh.add_comment(REPOSITORY, ISSUE, "/cancel mine now", "mallory")
    deliver(bot, "issue_comment", comment_delivery(outsider))
    wait_for(lambda: replies_to(gh, "mallory"), what="an answer to mallory")
    assert "cancel refused" in replies_to(gh, "mallory")[0]["body"]
    assert ws.run(review["run"])["status"] == "waiting"

    comment = gh.add_comment(REPOSITORY, ISSUE, "/cancel the plan is wrong", "alice")
    answer = deliver(bot, "issue_comment", comment_delivery(comment))
    assert answer.status_code == 200, answer.text
    run = ws.wait_run(review["run"], "cancelled")
    assert run["reason"] == "cancelled by github:alice: the plan is wrong"
    wait_for(lambda: "cancelled by github:alice" in str(gh.comments_on(REPOSITORY, ISSUE)),
             what="the issue told the run was cancelled")
    assert review_comment(gh, review["id"]) is not None

    started = gh.add_comment(REPOSITORY, ISSUE, "/run demo", "alice")
    deliver(bot, "issue_comment", comment_delivery(started))
    wait_for(lambda: [r for r in replies_to(gh, "alice") if "does not start a run" in r["body"]],
             what="the answer that a comment starts no run")
    assert len(ws.status()["runs"]) == 1


def test_json_logs_of_a_serve_parse_line_by_line_and_a_review_is_one_line(ws: Workspace) -> None:
    import json

    ws.write_config([demo_loop(run_on_start=True)], logging={"format": "json"})
    bot = ws.serve()
    review = ws.wait_open_review()
    done = ws.cli("decide", review["id"], "approve", "--as", "alice")
    assert done.returncode == 0, done.stderr
    ws.wait_run(review["run"], "completed")
    assert bot.terminate() == 0
    records = [json.loads(line) for line in bot.log().splitlines()]  # every line parses
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    posted = [r["message"] for r in records if r["message"].startswith(f"review {review['id']} (loop demo")]
    assert len(posted) == 1 and f"local-reviews/{review['id']}.md" in posted[0]
    assert "## " not in bot.log()  # no review's markdown in the log


def test_loopbot_cancel_beside_a_serve_is_applied_by_it_and_a_refusal_says_who_may(ws: Workspace) -> None:
    ws.write_config([demo_loop(run_on_start=True)])
    ws.serve()
    review = ws.wait_open_review()
    refused = ws.cli("cancel", review["run"], "--as", "mallory")
    assert refused.returncode == 1 and "cancel refused" in refused.stderr and "alice, bob, carol" in refused.stderr
    handed = ws.cli("cancel", review["run"], "--as", "carol", "--reason", "not this week")
    assert handed.returncode == 0 and "handed to the running server" in handed.stdout, handed.stderr
    run = ws.wait_run(review["run"], "cancelled")
    assert run["reason"] == "cancelled by local:carol: not this week"
    assert "Run demo-run-1 cancelled by local:carol: not this week." in (
        ws.root / "state" / "local-reviews" / f"{review['id']}.md").read_text()
