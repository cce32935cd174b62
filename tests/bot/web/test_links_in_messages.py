"""Each review message links its page when pages are on, and `loopbot status` prints the links."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from adapters.github.render import render_review as github_review
from adapters.slack.render import render_review as slack_review
from bot.cli import EXIT_OK, main
from bot.config import load_config
from bot.config_memo import WebView, load_view
from bot.desk.desk import review_post

from ..runtime_support import demo, write_config
from .support import SECRET, TOKEN, site


def test_the_slack_and_github_messages_link_the_review_page(tmp_path: Path) -> None:
    s = site(tmp_path)
    review = s.review(1)
    assert s.links is not None
    post = review_post(review, page_url=s.links.url)
    assert post.page_url is not None and post.page_url.startswith("https://bot.example.com/reviews/demo-1?t=")
    blocks = str(slack_review(post).blocks)
    assert f"<{post.page_url}|Whole proposal and history>" in blocks
    assert f"[Whole proposal and history]({post.page_url})" in github_review(post)
    # the link in the message opens the page
    assert TestClient(s.app).get(post.page_url.removeprefix("https://bot.example.com")).status_code == 200


def test_without_pages_the_messages_carry_no_link(tmp_path: Path) -> None:
    s = site(tmp_path, web={})
    post = review_post(s.review(1))
    assert post.page_url is None
    assert "/reviews/" not in str(slack_review(post).blocks) and "/reviews/" not in github_review(post)


def test_status_prints_each_open_review_page_link_when_pages_are_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOOPBOT_WEB_SECRET", SECRET)
    monkeypatch.setenv("LOOPBOT_WEB_TOKEN", TOKEN)
    s = site(tmp_path)
    s.review(1)
    s.review(2)
    path = write_config(tmp_path, [demo()], web={"secret": "${LOOPBOT_WEB_SECRET}", "token": "${LOOPBOT_WEB_TOKEN}",
                                                  "base_url": "https://bot.example.com"})
    assert main(["status", "--config", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    links = dict(re.findall(r"^(demo-\d)\s+(https://\S+)$", out, re.MULTILINE))
    assert set(links) == {"demo-1", "demo-2"}
    client = TestClient(s.app)
    for review_id, url in links.items():
        assert client.get(url.removeprefix("https://bot.example.com")).status_code == 200, review_id
    assert SECRET not in out and TOKEN not in out
    monkeypatch.delenv("LOOPBOT_WEB_SECRET")
    off = write_config(tmp_path, [demo()])
    assert main(["status", "--config", str(off)]) == EXIT_OK
    assert "/reviews/" not in capsys.readouterr().out


def test_the_web_block_names_a_secret_too_short_and_hides_both(tmp_path: Path) -> None:
    short = write_config(tmp_path, [demo()], web={"secret": "short"})
    with pytest.raises(Exception, match=r"web\.secret.*at least 16"):
        load_config(short, environ={})
    path = write_config(tmp_path, [demo()], web={"secret": SECRET, "token": TOKEN})
    config = load_config(path, environ={})
    assert {SECRET, TOKEN} <= set(config.secret_values())
    assert SECRET not in str(config.redacted()) and TOKEN not in config.summary()
    view = load_view(path, environ={"HOME": str(tmp_path)})
    assert view.web == WebView(SECRET, "http://127.0.0.1:8000", timedelta(days=30))
    assert SECRET in view.secrets and TOKEN in view.secrets


def test_status_reads_the_web_block_without_its_variables(tmp_path: Path) -> None:
    """An operator's shell without $LOOPBOT_WEB_SECRET still runs status (no links), as without Slack's token."""
    path = write_config(tmp_path, [demo()], web={"secret": "${LOOPBOT_WEB_SECRET}", "link_ttl": "7d",
                                                  "base_url": "https://bot.example.com"})
    view = load_view(path, environ={"HOME": str(tmp_path)})
    assert view.web == WebView(None, "https://bot.example.com", timedelta(days=7))
    with pytest.raises(Exception, match=r"LOOPBOT_WEB_SECRET"):
        load_config(path, environ={})  # serve needs it


def test_the_view_defaults_are_the_models_defaults() -> None:
    from bot.config_rules import WEB_BASE_URL, WEB_LINK_TTL

    assert (WebView().base_url, WebView().link_ttl) == (WEB_BASE_URL, WEB_LINK_TTL)
