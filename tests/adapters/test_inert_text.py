"""Text from loops and voters reaches people inert: no mention, disguised link, foreign image or command.

Every renderer (review, update, outcome, reminder, escalation, run end) of
both channels is fuzzed with hostile loop and voter text; the examples of
issue #23 (finding 8) are pinned one by one.
"""

from __future__ import annotations

import re
from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.channel import ReviewPost
from adapters.command_error import CommandError
from adapters.commands import parse_comment
from adapters.github import render as github
from adapters.inert import WORD_JOINER
from adapters.slack import render as slack
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest

WHEN = "2026-11-29T09:00:00+00:00"
HOSTILE = [
    "@alice", "@octo/ops-team", " @here ", "@channel", "@everyone", "bob@example.com", "&#64;carol", "&commat;dan",
    "<!channel>", "<!here>", "<!everyone>", "<!subteam^S0EVIL>", "<!subteam^S0EVIL|@ops>", "<@U0EVIL>",
    "<@W0EVIL|boss>", "slack:U0EVIL", "slack:U0AAA", "<#C0EVIL>", "<!date^1|x>",
    "[https://github.com/octo/ops](https://evil.example/steal)", "[docs](https://evil.example/a|b)",
    "<https://evil.example|https://github.com/octo/ops>", "![x](http://evil.example/pixel.png)",
    "![x][pixel]", "[pixel]: http://evil.example/pixel.png", "[a][b]", "[a]: <http://evil.example>",
    '<img src="http://evil.example/p.png">', "<details><summary>x</summary>", "<!-- loopbot:review=demo-1 -->",
    "<br>", "&lt;b&gt;", "&amp;", "&", "\\", "\\[", "`", "```", "~~~", "]", "[", "(", ")", "|", "*", "**", "_",
    "\n", "\r\n", "\n/yes\n", "/approve", "   /reject no", "\n> quoted\n", "# heading", "\u2060", "\u202e",
]

fragments = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=12)), max_size=12).map("".join)
#: Mostly short, sometimes tens of kilobytes (cut by every renderer's limits).
hostile = st.one_of(
    fragments,
    st.tuples(fragments, st.integers(min_value=100, max_value=6000)).map(lambda pair: pair[0] * pair[1]),
)


def post_with(text: str, *, status: str = "open", reviewers: dict[str, tuple[str, ...]] | None = None) -> ReviewPost:
    request = ReviewRequest(
        checkpoint_id="checkpoint_0001",
        trigger=CheckpointTrigger.ON_EXTERNAL_REQUEST,
        state_summary={"iteration": 1, "status": "PAUSED", "current_step": text,
                       "unrecovered_failures": [{"type": "TOOL_ERROR", "step": text, "message": text}],
                       text[:40] or "key": text, "rows": [{"title": text, "url": text}]},
        proposed_action=text,
        context={"issue title": text, text[:30] or "k": text},
        timestamp=datetime(2026, 11, 29, 8, 0, 0),
    )
    return ReviewPost(review_id="demo-1", loop="demo", run_id="demo-run-1", request=request,
                      reviewers_hint=text[:200], reviewers=reviewers or {}, status=status)


# --- what must never survive ------------------------------------------------------------------------------------
_GITHUB_OWN = re.compile(r"<!-- /?loopbot:[a-z]+(?:=[\w:.-]+)? -->|<br>|<details><summary>Details</summary>|</details>")
_SAFE_ENTITY = re.compile(r"&(?:amp|lt|gt|quot|#39|#8288);")  # #8288: a joiner the voter wrote


def assert_inert_on_github(body: str, *, own_link: str | None = None) -> None:
    assert len(body) <= 65_536
    if own_link is not None:  # the one link loopbot makes itself stays
        assert body.count(own_link) == 1
        body = body.replace(own_link, "")
    how = re.compile(r"\nComment on this issue with one of these commands.*?`loopbot:pause`\.\n", re.DOTALL)
    body = how.sub("\n", body)  # loopbot's own words (`/reject <reason>` in code), who may answer kept
    assert not re.search(r"@[A-Za-z0-9_-]", body), "a mention survived"
    assert not re.search(r"\][(\[:]", body), "a link, image or reference survived"
    assert "<" not in _GITHUB_OWN.sub("", body), "raw HTML survived"
    assert "&" not in _SAFE_ENTITY.sub("", body), "a character reference survived"
    try:
        assert parse_comment(body) == [], "a line of the bot's comment reads as a command"
    except CommandError as err:
        raise AssertionError(f"a line of the bot's comment reads as a command: {err}") from err


def slack_texts(message: slack.RenderedMessage) -> list[str]:
    found = [message.text]
    for block in message.blocks:
        if block.get("text", {}).get("type") == "mrkdwn":
            assert block["text"].get("verbatim") is True  # Slack links and mentions nothing on its own
            found.append(block["text"]["text"])
        for element in block.get("elements", []):
            if element.get("type") == "mrkdwn":
                assert element.get("verbatim") is True
                found.append(element["text"])
    return found


def assert_inert_on_slack(message: slack.RenderedMessage, mentions: set[str]) -> None:
    for text in slack_texts(message):
        for markup in re.findall(r"<([^<>]*)>", text):
            if markup.startswith("@"):
                assert markup[1:] in mentions, f"mention <{markup}> survived"
            else:
                assert re.fullmatch(r"https?://[^|\s]+", markup), f"<{markup}> is a disguised link or a ping"
        assert not re.search(r"@(?:here|channel|everyone)\b", text), "a bare @here survived"
        assert "<!" not in text


# --- the fuzz -----------------------------------------------------------------------------------------------------
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(loop_text=hostile, voter_text=hostile)
def test_github_renderers_keep_hostile_text_inert(loop_text: str, voter_text: str) -> None:
    open_post = post_with(loop_text)
    assert_inert_on_github(github.render_review(open_post))
    assert_inert_on_github(github.render_escalation(open_post, f"Escalated: {voter_text}"))
    decided = post_with(loop_text, status="decided")
    outcomes = [f"Decided: REJECT by github:bob at {WHEN} - {voter_text}", f"Run demo-run-1 rejected: {voter_text}"]
    body = github.render_review(decided, [(github.outcome_key(text), text) for text in outcomes])
    assert_inert_on_github(body)
    if not any(github.outcome_is_cut(text) for text in outcomes):  # (a longer one is cut, and posted whole)
        assert [text for _, text in github.outcomes_in(body)] == [text.strip() for text in outcomes]
    marker = github.answer_marker("update:demo-1:abc")
    url = "https://github.com/octo/ops/issues/42#issuecomment-1"
    for text in (f"Reminder: {voter_text}", f"Run demo-run-1 completed. Result: {loop_text}",
                 f"Votes, as cast:\n- {WHEN} github:bob reject - {voter_text} (via github)"):
        assert_inert_on_github(github.render_update(decided, marker, text, url), own_link=f"]({url})")


@FUZZ
@given(loop_text=hostile, voter_text=hostile)
def test_slack_renderers_keep_hostile_text_inert(loop_text: str, voter_text: str) -> None:
    reviewers = {"slack": ("U0AAA", "U0BBB")}
    open_post = post_with(loop_text, reviewers=reviewers)
    named = {"U0AAA", "U0BBB"}
    assert_inert_on_slack(slack.render_review(open_post), named)
    assert_inert_on_slack(slack.render_escalation(open_post, f"Escalated: {voter_text}"), named)
    decided = post_with(loop_text, status="decided", reviewers=reviewers)
    outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - {voter_text}"
    assert_inert_on_slack(slack.render_review(decided, outcome), {"U0AAA"})
    assert_inert_on_slack(slack.render_update(outcome), {"U0AAA"})  # the voter loopbot names
    for text in (f"Reminder: {voter_text}", f"Run demo-run-1 completed. Result: {loop_text}",
                 f"Votes, as cast:\n- {WHEN} slack:U0AAA reject - {voter_text} (via slack)",
                 f"Timed out: REJECT (default) at {WHEN}. {voter_text}"):
        assert_inert_on_slack(slack.render_update(text), set())
    assert_inert_on_slack(slack.render_run_parent("demo", "demo-run-1"), set())


# --- the examples of the issue ------------------------------------------------------------------------------------
ISSUE_TEXT = (
    "Triage: @alice please look; cc @octo/ops-team. See [https://github.com/octo/ops](https://evil.example/steal)"
    " ![status](https://evil.example/pixel.png?u=1) <img src=\"https://evil.example/t.gif\">"
)


def shown(text: str) -> str:
    return text.replace(WORD_JOINER, "")


def test_github_shows_mentions_links_and_images_as_the_text_they_are() -> None:
    body = github.render_review(post_with(ISSUE_TEXT))
    assert_inert_on_github(body)
    assert f"@{WORD_JOINER}alice" in body and f"@{WORD_JOINER}octo/ops-team" in body
    assert "(https://evil.example/steal)" in body  # the real target is what the reader sees
    assert "&lt;img" in body and "<img" not in body
    assert "@alice please look; cc @octo/ops-team" in shown(body)  # and it reads as written
    reason = "no: ask @alice, see [the runbook](https://evil.example/x) ![t](https://evil.example/p.gif)"
    outcome = f"Decided: REJECT by github:bob at {WHEN} - {reason}"
    decided = github.render_review(post_with("x", status="decided"), [(github.outcome_key(outcome), outcome)])
    assert_inert_on_github(decided)
    assert github.outcomes_in(decided) == [(github.outcome_key(outcome), outcome)]  # read back as the voter wrote it


def test_github_keeps_the_links_and_mentions_loopbot_makes() -> None:
    post = post_with(ISSUE_TEXT, reviewers={"github": ("alice", "bob")})
    body = github.render_review(post)
    assert "needs 1 approval of these 2: @alice, @bob" in body  # the reviewers loopbot names
    url = "https://github.com/octo/ops/issues/42#issuecomment-7"
    text = f"Run demo-run-1 completed. Result: {ISSUE_TEXT}"
    update = github.render_update(post, github.answer_marker("u"), text, url)
    assert f"**loopbot** [review `demo-1`]({url}): Run demo-run-1 completed." in update


def test_slack_shows_a_disguised_link_with_its_real_target_and_pings_nobody() -> None:
    text = ISSUE_TEXT + " <!channel> <!here> <!subteam^S0OPS> <@U0EVIL> slack:U0EVIL [x](https://a.example|b)"
    message = slack.render_review(post_with(text, reviewers={"slack": ("U0AAA",)}))
    assert_inert_on_slack(message, {"U0AAA"})
    joined = shown("\n".join(slack_texts(message)))
    assert "https://github.com/octo/ops (<https://evil.example/steal>)" in joined
    assert "&lt;!channel&gt; &lt;!here&gt; &lt;!subteam^S0OPS&gt; &lt;@U0EVIL&gt; slack:U0EVIL" in joined
    assert "<@U0AAA>" in joined  # the reviewer loopbot names


def test_slack_mentions_the_voters_of_an_outcome_not_the_shorthand_in_its_note_or_other_texts() -> None:
    outcome = f"Decided: REJECT by slack:U0AAA at {WHEN} - ask slack:U0BOSS <!here>"
    [line] = slack_texts(slack.render_update(outcome))[1:]
    assert line == "Rejected by <@U0AAA>: ask slack:U0BOSS &lt;!here&gt;"
    run_end = slack.render_update("Run demo-run-1 completed. Result: 2 issues for slack:U0AAA")
    assert "<@" not in "".join(slack_texts(run_end))

