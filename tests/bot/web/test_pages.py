"""The pages' routes: what each shows to whom may see it, and every refusal (issue 21)."""

from __future__ import annotations

import base64
import re
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bot.review_records import Outcome, Vote
from bot.store.base import OutboxTask
from loop_engine.review import HumanDecision

from .support import SECRET, TOKEN, Site, bearer, site

HEADERS = {
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def secured(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    for key, value in HEADERS.items():
        assert headers[key] == value
    policy = headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "default-src 'none'" in policy


def shows_nothing_secret(text: str, s: Site) -> None:
    assert SECRET not in text and TOKEN not in text
    assert str(s.config.state_dir) not in text and str(s.config.state_dir.parent) not in text


@pytest.fixture
def s(tmp_path: Path) -> Site:
    return site(tmp_path)


def test_a_review_link_shows_the_whole_proposal_its_votes_and_how_to_answer(s: Site) -> None:
    s.review(1, rows=40)
    response = TestClient(s.app).get(s.url("demo-1"))
    assert response.status_code == 200
    secured(response)
    page = response.text
    assert "apply the labels (1)" in page and "Approve to apply 40 label changes to octo/ops" in page
    assert page.count("<tr><td>#") == 40 and '<th scope="col">Label</th>' in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page  # loop text is inert
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "loopbot decide demo-1 approve --as alice" in page
    assert '<a href="https://example.com/report"' in page
    shows_nothing_secret(page, s)


def test_the_filter_box_narrows_the_rows_on_the_server_with_scripts_off(s: Site) -> None:
    s.review(1, rows=300)
    client = TestClient(s.app)
    response = client.get(s.url("demo-1") + "&q=%2315")  # "#15": #15 and #150..#159
    rows = re.findall(r"<tr><td>(#\d+)</td>", response.text)
    assert rows == ["#15", *(f"#{n}" for n in range(150, 160))]
    assert "11 of 300 rows" in response.text
    token = s.url("demo-1").split("?t=")[1]
    assert f'name="t" value="{token}"' in response.text  # the form keeps the link's own token for the next filter


def test_votes_history_outcome_and_the_posted_messages_are_shown(s: Site) -> None:
    review = s.review(1)
    voted = s.clock() + timedelta(minutes=5)
    first = Vote("slack:U0AAA", HumanDecision.PAUSE, "wait", at=voted, source="slack")
    second = Vote("slack:U0AAA", HumanDecision.APPROVE, "ok now", at=voted + timedelta(minutes=1), source="slack")
    review.votes = [second]
    review.history.append(first)
    review.history.append(second)
    review.status = "decided"
    review.outcome = Outcome(HumanDecision.APPROVE, ["slack:U0AAA"], voted + timedelta(minutes=1))
    review.posts = [{"channel": "slack", "data": {"channel": "C0123", "ts": "1700.000100", "thread_ts": "1700.000100"},
                     "target": "slack:C0123"},
                    {"channel": "github", "data": {"repository": "octo/ops", "issue": 4, "comment_id": 9,
                                                   "url": "https://github.com/octo/ops/issues/4#issuecomment-9"},
                     "target": "github:octo/ops"}]
    s.store.put_review(review)
    page = TestClient(s.app).get(s.url("demo-1")).text
    assert "Decided: APPROVE by slack:U0AAA" in page
    assert page.index(">pause<") < page.index(">approve<", page.index("History"))
    assert "https://slack.com/archives/C0123/p1700000100" in page
    assert "https://github.com/octo/ops/issues/4#issuecomment-9" in page
    assert "Who may answer" not in page  # decided: nobody is invited to answer any more


@pytest.mark.parametrize("how", ["no token", "wrong token", "expired", "another review's", "unknown review"])
def test_a_review_page_without_its_valid_link_answers_404_and_shows_nothing(s: Site, how: str) -> None:
    s.review(1)
    s.review(2)
    client = TestClient(s.app)
    url = {"no token": "/reviews/demo-1", "wrong token": "/reviews/demo-1?t=1999999999.AAAA",
           "expired": s.url("demo-1"), "another review's": s.url("demo-2").replace("demo-2", "demo-1"),
           "unknown review": s.url("demo-9")}[how]
    if how == "expired":
        s.clock.advance(days=30, seconds=1)
    response = client.get(url)
    assert response.status_code == 404
    assert response.text == "not found\n"
    secured(response)


def test_the_operator_token_opens_any_review_page(s: Site) -> None:
    s.review(1)
    response = TestClient(s.app).get("/reviews/demo-1", headers=bearer())
    assert response.status_code == 200 and "Review demo-1" in response.text
    assert 'href="/"' in response.text  # the operator gets the way back to the dashboard


WRONG = [None, "Bearer wrong-token-0123456789", "Basic " + base64.b64encode(b"x:y").decode()]


@pytest.mark.parametrize("path", ["/", "/runs/demo-run-1", "/metrics"])
@pytest.mark.parametrize("header", WRONG)
def test_the_dashboard_runs_and_metrics_refuse_without_the_operator_token(s: Site, path: str,
                                                                          header: str | None) -> None:
    s.review(1)
    s.run(1)
    response = TestClient(s.app).get(path, headers={"Authorization": header} if header else {})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic ")
    assert response.text == "unauthorized\n"
    secured(response)


def test_a_review_link_opens_no_other_page(s: Site) -> None:
    s.review(1)
    s.run(1)
    token = s.url("demo-1").split("?t=")[1]
    client = TestClient(s.app)
    for path in ("/", "/runs/demo-run-1", "/metrics"):
        assert client.get(f"{path}?t={token}").status_code == 401


def test_pages_are_off_without_web_secret(tmp_path: Path) -> None:
    off = site(tmp_path, web={"token": TOKEN})
    off.review(1)
    client = TestClient(off.app)
    assert off.links is None
    for path in ("/", "/reviews/demo-1", "/runs/demo-run-1", "/metrics", "/static/pages.css"):
        assert client.get(path, headers=bearer()).status_code == 404


def test_without_web_token_only_the_review_links_are_served(tmp_path: Path) -> None:
    half = site(tmp_path, web={"secret": SECRET})
    half.review(1)
    client = TestClient(half.app)
    assert client.get(half.url("demo-1")).status_code == 200
    for path in ("/", "/runs/demo-run-1", "/metrics"):
        assert client.get(path).status_code == 404


def test_the_dashboard_lists_open_reviews_oldest_first_a_page_at_a_time(s: Site) -> None:
    for n in range(1, 121):
        s.review(n, age=timedelta(minutes=200 - n))
    client = TestClient(s.app)
    first = client.get("/", headers=bearer())
    secured(first)
    ids = re.findall(r'<a href="/reviews/(demo-\d+)">', first.text)
    assert ids == [f"demo-{n}" for n in range(1, 51)]
    assert "Open reviews (120)" in first.text and "Page 1 of 3" in first.text
    last = client.get("/?page=3", headers=bearer())
    assert re.findall(r'<a href="/reviews/(demo-\d+)">', last.text) == [f"demo-{n}" for n in range(101, 121)]


def test_the_dashboard_shows_runs_loops_and_failing_deliveries_without_secrets(tmp_path: Path) -> None:
    loops = [{"name": "demo", "pattern": "demo", "schedule": {"cron": "0 9 * * 1"}}]
    s = site(tmp_path, loops=loops)
    s.review(1)
    s.run(1)
    s.run(2, status="running", review=False)
    failure = f"cannot write {s.config.state_dir}/local-reviews/x.md; token {TOKEN} refused"
    s.store.add_task(OutboxTask(id="demo-1.post.slack-c0123", channel="slack", action="post", review_id="demo-1",
                                payload={"target": {"slack": {"channel": "C0123"}}}, created_at=s.clock(),
                                attempts=4, not_before=s.clock() + timedelta(minutes=8), last_error=failure))
    s.clock.advance(minutes=1)  # Monday 09:01: this week's run is past
    page = TestClient(s.app).get("/", headers=bearer()).text
    assert "Runs waiting and running (2)" in page and "demo-run-2" in page
    assert "<td>cron 0 9 * * mon (UTC)</td><td>2026-03-09T09:00:00+00:00</td>" in page
    assert "slack:C0123" in page and "cannot write state_dir/local-reviews/x.md; token *** refused" in page
    shows_nothing_secret(page, s)


def test_a_run_page_shows_its_plan_checkpoints_reviews_and_audit(tmp_path: Path) -> None:
    from ..runtime_support import bench, demo

    b = bench(tmp_path, [demo()], web={"secret": SECRET, "token": TOKEN})
    run = b.runner.run_foreground("demo")
    from bot.web.pages import web_routes
    from bot.server import create_app

    app = create_app(b.store, b.config.state_dir, web_routes(b.config, b.store, clock=b.clock))
    response = TestClient(app).get(f"/runs/{run.id}", headers=bearer())
    assert response.status_code == 200
    secured(response)
    page = response.text
    assert f"Run {run.id}" in page and "Still waiting." in page
    assert '<th scope="col">Step</th>' in page and "Checkpoints and their reviews" in page
    assert f'href="/reviews/{run.review_id}"' in page
    assert "Audit (markdown)" in page and "# " in page.split("Audit (markdown)")[1]
    assert TestClient(app).get("/runs/nope-1", headers=bearer()).status_code == 404


def test_metrics_answers_in_prometheus_format_with_the_token(s: Site) -> None:
    response = TestClient(s.app).get("/metrics", headers=bearer())
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_the_diagnostics_show_no_secret_and_no_path_of_the_server(s: Site) -> None:
    review = s.review(1)
    review.request["context"] = {"workdir": f"{s.config.state_dir}/work", "auth": f"Bearer {TOKEN}"}
    review.request["state_summary"] = {"note": f"signed with {SECRET}"}
    s.store.put_review(review)
    page = TestClient(s.app).get(s.url("demo-1")).text
    assert "&#34;workdir&#34;: &#34;state_dir/work&#34;" in page and "Bearer ***" in page and "signed with ***" in page
    shows_nothing_secret(page, s)
