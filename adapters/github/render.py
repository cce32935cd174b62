"""What does a review look like as a GitHub comment? Markdown with a hidden marker, under GitHub's size cap.

The comment is the request (``ReviewRequest.to_markdown()``), who may answer
and how many must agree, how to answer (comment lines and labels), and a
hidden ``<!-- loopbot:review=ID -->`` marker by which the channel finds its own
comment again after a crash. Once the review is no longer open the comment is
re-rendered with an "Outcome" section and without "How to answer".
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from loop_engine.markdown import escape_inline

from ..channel import ReviewPost

__all__ = [
    "MAX_COMMENT_CHARS",
    "OUTCOME_HEADING",
    "answer_marker",
    "escalation_marker",
    "outcomes_in",
    "render_escalation",
    "render_review",
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
    """``text`` cut to ``limit`` characters by dropping its middle and saying where the whole is."""
    if len(text) <= limit:
        return text
    note = f"\n\n> … {len(text) - limit + len(pointer) + 32:,} characters left out: {pointer}\n\n"
    keep = max(limit - len(note), 0)
    head = keep * 2 // 3
    return text[:head] + note + text[len(text) - (keep - head):]


def _who(post: ReviewPost) -> str:
    logins = post.reviewers.get("github") or ()
    if logins:
        people = ", ".join(f"@{login.lstrip('@')}" for login in logins)
    elif post.reviewers_hint:
        people = escape_inline(post.reviewers_hint)
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


_LINE_COMMAND = re.compile(r"^( {0,3})/", re.MULTILINE)
_ESCAPED_SLASH = re.compile(r"^( {0,3})\\/", re.MULTILINE)


def _escape_block(text: str) -> str:
    """Text from people (a reject reason) kept as lines but unable to carry HTML, fake markers or commands."""
    text = text.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _LINE_COMMAND.sub(r"\1\\/", text)  # "\/approve" shows as "/approve" and is no command


def _outcome_section(outcomes: Sequence[str]) -> list[str]:
    lines = [OUTCOME_HEADING, ""]
    for text in outcomes:
        lines += ["<!-- loopbot:outcome -->", _escape_block(text), "<!-- /loopbot:outcome -->", ""]
    return lines


def outcomes_in(body: str) -> list[str]:
    """The outcome entries an earlier render wrote into ``body`` (to add one, not replace them)."""
    return [html.unescape(_ESCAPED_SLASH.sub(r"\1/", match.group("text"))) for match in _OUTCOME_ENTRY.finditer(body)]


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
    request = truncate_middle(post.request.to_markdown().rstrip(), max(room, 0), pointer)
    return f"{head_text}\n{request}\n{tail_text}"[:MAX_COMMENT_CHARS]


def render_escalation(post: ReviewPost, text: str, *, full_text_hint: str | None = None) -> str:
    """An escalation notice: ``text`` on top, then the review as it stands (with how to answer)."""
    body = render_review(post, full_text_hint=full_text_hint)
    notice = f"{escalation_marker(post.review_id)}\n**{escape_inline(text.strip())}**\n\n"
    return (notice + body.split("\n", 1)[1])[:MAX_COMMENT_CHARS]
