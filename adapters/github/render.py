"""What does a review look like as a GitHub comment? Markdown with a hidden marker, under GitHub's size cap.

The comment is the request (``ReviewRequest.to_markdown()``), who may answer
and how many must agree, how to answer (comment lines and labels), and a
hidden ``<!-- loopbot:review=ID -->`` marker by which the channel finds its own
comment again after a crash. Once the review is no longer open the comment is
re-rendered with an "Outcome" section and without "How to answer".

Everything a loop or a voter wrote passes through ``adapters.inert`` (no
mention, disguised link, image or HTML of theirs), and every comment is
finished by ``fit_comment``: cut at line ends to GitHub's cap, with no line
that ``parse_comment`` would count, so the bot never reads its own text as a vote.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from loop_engine.markdown import escape_inline

from ..channel import ReviewPost
from ..inert import cut_lines, escape_command_lines, github_markdown, github_text, restore

__all__ = [
    "MAX_COMMENT_CHARS",
    "OUTCOME_HEADING",
    "answer_marker",
    "escalation_marker",
    "fit_comment",
    "outcomes_in",
    "render_escalation",
    "render_review",
    "render_update",
    "review_marker",
    "run_marker",
    "truncate_middle",
]

#: GitHub refuses comment bodies over 65,536 characters; stay well below it.
MAX_COMMENT_CHARS = 65_000
OUTCOME_HEADING = "## Outcome"
_OUTCOME_ENTRY = re.compile(r"<!-- loopbot:outcome -->\n(?P<text>.*?)\n<!-- /loopbot:outcome -->", re.DOTALL)


def review_marker(review_id: str) -> str:
    return f"<!-- loopbot:review={review_id} -->"


def escalation_marker(review_id: str) -> str:
    return f"<!-- loopbot:escalation={review_id} -->"


def run_marker(run_id: str) -> str:
    return f"<!-- loopbot:run={run_id} -->"


def answer_marker(key: str) -> str:
    return f"<!-- loopbot:answer={key} -->"


def truncate_middle(text: str, limit: int, pointer: str) -> str:
    """``text`` cut to ``limit`` characters by dropping whole lines from its middle and saying where the whole is.

    Both cuts fall on line ends: a cut inside a line would start a new one
    with whatever came next, a ``/yes`` of the loop's text included.
    """
    if len(text) <= limit:
        return text
    note = f"\n\n> … {len(text) - limit + len(pointer) + 32:,} characters left out: {pointer}\n\n"
    keep = max(limit - len(note), 0)
    head = cut_lines(text, keep * 2 // 3)
    start = text.find("\n", len(text) - (keep - len(head)))
    tail = text[start + 1:] if start != -1 else ""
    return head + note + tail


def fit_comment(body: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """A comment as loopbot posts it: command-looking lines escaped, cut at a line end to ``limit``, escaped again.

    Escaping first makes the length final; the second pass (after cutting)
    is what guarantees no line of the posted comment reads as a command.
    """
    return escape_command_lines(cut_lines(escape_command_lines(body), limit))


def _who(post: ReviewPost) -> str:
    logins = post.reviewers.get("github") or ()
    if logins:  # the reviewers loopbot itself names: the one mention a review makes
        people = ", ".join(f"@{login.lstrip('@')}" for login in logins)
    elif post.reviewers_hint:
        people = github_text(" ".join(post.reviewers_hint.split()))
    elif post.restricted:
        people = "only the loop's named reviewers"
    else:
        people = "anyone who can comment here"
    return f"needs {post.approvals_required} approval{'s' if post.approvals_required != 1 else ''} of: {people}"


def _how_to_answer(review_id: str) -> list[str]:
    # List items, never lines that start with "/": the bot's own text must not read as a command.
    return [
        "## How to answer",
        "",
        "Comment on this issue with one of these lines (the review id is optional here):",
        "",
        f"- `/approve [note]` (or `/approve {review_id}`)",
        "- `/reject <reason>` (a reason is required)",
        "- `/retry [hint]`",
        "- `/modify context.KEY=VALUE ...` (or a fenced ```json block after `/modify`)",
        "- `/pause 2h` (silences reminders; default 24h)",
        "- `/status`, `/help`",
        "",
        "or add one of the labels `loopbot:approve`, `loopbot:reject`, `loopbot:retry`, `loopbot:pause`.",
    ]


_ESCAPED_SLASH = re.compile(r"^( {0,3})\\/", re.MULTILINE)


def _escape_block(text: str) -> str:
    """Text from people (a reject reason) kept as lines but unable to carry HTML, fake markers, mentions or commands."""
    return escape_command_lines(github_text(text.strip()))  # "\/approve" shows as "/approve" and is no command


def _outcome_section(outcomes: Sequence[str]) -> list[str]:
    lines = [OUTCOME_HEADING, ""]
    for text in outcomes:
        lines += ["<!-- loopbot:outcome -->", _escape_block(text), "<!-- /loopbot:outcome -->", ""]
    return lines


def outcomes_in(body: str) -> list[str]:
    """The outcome entries an earlier render wrote into ``body`` (to add one, not replace them)."""
    return [html.unescape(restore(_ESCAPED_SLASH.sub(r"\1/", match.group("text"))))
            for match in _OUTCOME_ENTRY.finditer(body)]


def render_review(post: ReviewPost, outcomes: Sequence[str] = (), *, full_text_hint: str | None = None) -> str:
    """The review comment; ``outcomes`` (when the review is closed) replace "How to answer"."""
    head = [
        review_marker(post.review_id),
        f"**loopbot review `{post.review_id}`** · loop `{escape_inline(post.loop)}`"
        f" · run `{escape_inline(post.run_id)}`",
        "",
        f"**Who can answer:** {_who(post)}",
        "",
    ]
    tail: list[str] = [""]
    if post.status == "open" and not outcomes:
        tail += _how_to_answer(post.review_id)
    else:
        tail += _outcome_section(outcomes or [f"This review is {post.status}."])
    head_text, tail_text = "\n".join(head), "\n".join(tail).rstrip() + "\n"
    pointer = full_text_hint or f"full text in state_dir/local-reviews/{post.review_id}.md"
    room = MAX_COMMENT_CHARS - len(head_text) - len(tail_text) - 2
    request = escape_command_lines(github_markdown(post.request.to_markdown().rstrip()))
    request = truncate_middle(request, max(room, 0), pointer)
    return fit_comment(f"{head_text}\n{request}\n{tail_text}")


def render_escalation(post: ReviewPost, text: str, *, full_text_hint: str | None = None) -> str:
    """An escalation notice: ``text`` on top, then the review as it stands (with how to answer)."""
    body = render_review(post, full_text_hint=full_text_hint)
    notice = f"{escalation_marker(post.review_id)}\n**{github_text(' '.join(text.split()))}**\n\n"
    return fit_comment(notice + body.split("\n", 1)[1])


def render_update(post: ReviewPost, marker: str, text: str, url: str | None = None) -> str:
    """A reply comment (a reminder, the run's end, a vote history) on one line: ``text`` inert, the link loopbot's."""
    link = f"review `{post.review_id}`"
    if url:
        link = f"[{link}]({url})"
    return fit_comment(f"{marker}\n**loopbot** {link}: {github_text(' '.join(text.split()))}")
