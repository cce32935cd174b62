"""What does a review look like in Slack? ``ReviewPost`` -> Block Kit blocks in mrkdwn.

mrkdwn is not Markdown (protocols.md): no headings, no tables, ``*bold*``
with single asterisks, and only ``&``, ``<`` and ``>`` need escaping. So
this module builds the message from the request's fields instead of
converting ``ReviewRequest.to_markdown()``: a header, the facts as short
labelled lines, the current step, the recent failures, who may answer and
how many must agree, the buttons (only while the review is open), and a
pointer to the full text in the local channel's file. Everything that came
from the loop or a voter is inert (``mrkdwn.inert``): a failure message
cannot ping ``<!channel>``, ``<!subteam^…>`` or ``<@U…>``, and a link shows
its real target. The reviewers (and an outcome's voters), named by loopbot,
are the only mentions; the text objects are ``verbatim``, so Slack links no
bare URL or ``#channel`` on its own. Long content is cut to Block Kit's
limits (section text ≤ 3,000 characters, header ≤ 150, ≤ 50 blocks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from adapters.channel import ReviewPost

from .mrkdwn import escape, inert, outcome_line, to_mrkdwn

__all__ = [
    "ACTION_IDS",
    "ACTION_PREFIX",
    "MAX_BLOCKS",
    "MAX_HEADER",
    "MAX_SECTION",
    "RenderedMessage",
    "full_text_pointer",
    "render_escalation",
    "render_review",
    "render_run_parent",
    "render_update",
]

MAX_SECTION = 3000
MAX_HEADER = 150
MAX_BLOCKS = 50
#: How much of one loop-provided value (a failure message, a context value) is shown.
MAX_VALUE = 500
#: How many unrecovered failures are listed (the latest ones).
MAX_FAILURES = 5
#: How many state / context entries are listed.
MAX_LISTED = 25

ACTION_PREFIX = "loopbot_"
#: Button label -> action_id; the button's value is the review id.
ACTION_IDS: dict[str, str] = {
    "Approve": "loopbot_approve",
    "Reject": "loopbot_reject",
    "Retry": "loopbot_retry",
    "Modify": "loopbot_modify",
    "Pause": "loopbot_pause",
}
_BUTTON_STYLE = {"Approve": "primary", "Reject": "danger"}

#: Summary keys shown in their own sections, not in the facts list.
_OWN_SECTION = ("current_step", "unrecovered_failures")
_SUMMARY_HEAD = ("iteration", "status", "plan_progress", "failures")


@dataclass(frozen=True)
class RenderedMessage:
    """``text`` is the notification / fallback line; ``blocks`` what Slack shows."""

    text: str
    blocks: list[dict[str, Any]]


# --- text ------------------------------------------------------------------------
def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: Any) -> str:
    """A summary/context value as one escaped, bounded line."""
    if value is None:
        shown = "-"
    elif isinstance(value, str):
        shown = value
    elif isinstance(value, datetime):
        shown = value.isoformat()
    else:
        shown = json.dumps(value, ensure_ascii=False, default=repr)
    return to_mrkdwn(_cut(" ".join(shown.split()), MAX_VALUE))


def _label(key: str) -> str:
    return inert(key.replace("_", " ").capitalize())


def _mentions(users: Iterable[str]) -> str:
    return ", ".join(f"<@{user}>" for user in users)


def full_text_pointer(review_id: str) -> str:
    return f"`local-reviews/{escape(review_id)}.md` in the bot's state directory"


# --- blocks ------------------------------------------------------------------------
def _mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn text object Slack does not pre-process: only the markup loopbot wrote links or mentions."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _sections(text: str) -> list[dict[str, Any]]:
    """``text`` in as many sections as it needs, split at line ends (one long line is cut)."""
    chunks: list[str] = []
    current = ""
    for line in text.split("\n"):
        line = _cut(line, MAX_SECTION)
        if current and len(current) + 1 + len(line) > MAX_SECTION:
            chunks.append(current)
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        chunks.append(current)
    return [_section(chunk) for chunk in chunks]


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": _cut(text, MAX_HEADER), "emoji": True}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(_cut(text, MAX_SECTION))]}


def _buttons(review_id: str) -> dict[str, Any]:
    elements = []
    for label, action_id in ACTION_IDS.items():
        button: dict[str, Any] = {
            "type": "button",
            "action_id": action_id,
            "value": review_id,
            "text": {"type": "plain_text", "text": label},
        }
        if label in _BUTTON_STYLE:
            button["style"] = _BUTTON_STYLE[label]
        elements.append(button)
    return {"type": "actions", "block_id": f"loopbot_review:{review_id}"[:255], "elements": elements}


def _who(post: ReviewPost) -> str:
    users = tuple(post.reviewers.get("slack", ()))
    need = post.approvals_required
    if users:
        who = _mentions(users)
        return f"*Who can answer:* {who} ({need} of them must approve)" if len(users) > 1 or need > 1 else (
            f"*Who can answer:* {who}"
        )
    if post.reviewers_hint:
        return f"*Who can answer:* {inert(post.reviewers_hint)} ({need} must approve)"
    if post.restricted:
        return f"*Who can answer:* nobody on Slack is named for this review ({need} approval(s) needed elsewhere)"
    return f"*Who can answer:* anyone in this channel ({need} approval{'s' if need != 1 else ''} needed)"


def _headline(post: ReviewPost) -> str:
    request = post.request
    return "\n".join([
        f"*Loop:* {escape(post.loop)}   *Run:* `{escape(post.run_id)}`   *Review:* `{escape(post.review_id)}`",
        f"*Triggered by:* {escape(request.trigger.value.replace('_', ' '))}",
        f"*Proposed action:* {_show(request.proposed_action or '-')}",
    ])


def _listed(title: str, items: list[tuple[str, Any]]) -> str:
    """A titled bullet list of at most ``MAX_LISTED`` items, saying how many more there are."""
    if not items:
        return ""
    lines = [f"*{title}*", *(f"• {_label(key)}: {_show(value)}" for key, value in items[:MAX_LISTED])]
    if len(items) > MAX_LISTED:
        lines.append(f"_…and {len(items) - MAX_LISTED} more_")
    return "\n".join(lines)


def _state(post: ReviewPost) -> str:
    summary = post.request.state_summary
    keys = [k for k in _SUMMARY_HEAD if k in summary] + [k for k in summary if k not in _SUMMARY_HEAD]
    return _listed("State", [(k, summary[k]) for k in keys if k not in _OWN_SECTION])


def _step_and_failures(post: ReviewPost) -> str:
    summary = post.request.state_summary
    lines: list[str] = []
    if summary.get("current_step"):
        lines.append(f"*Current step:* {_show(summary['current_step'])}")
    failures = summary.get("unrecovered_failures") or []
    if isinstance(failures, list) and failures:
        shown = failures[-MAX_FAILURES:]
        more = len(failures) - len(shown)
        lines.append(f"*Recent failures* ({len(failures)} unrecovered{f', latest {len(shown)} shown' if more else ''})")
        for failure in shown:
            if isinstance(failure, dict):
                kind = _show(failure.get("type", "failure"))
                step = f" at step `{_show(failure['step'])}`" if failure.get("step") else ""
                lines.append(f"• {kind}{step}: {_show(failure.get('message', ''))}")
            else:
                lines.append(f"• {_show(failure)}")
    return "\n".join(lines)


def _request_context(post: ReviewPost) -> str:
    return _listed("Context", [(str(k), v) for k, v in post.request.context.items()])


def _limit_blocks(body: list[dict[str, Any]], tail: list[dict[str, Any]], review_id: str) -> list[dict[str, Any]]:
    room = MAX_BLOCKS - len(tail)
    if len(body) > room:
        body = body[: room - 1] + [_section(f"_…cut to fit Slack; the full text is in {full_text_pointer(review_id)}_")]
    return body + tail


def render_review(post: ReviewPost, outcome: str | None = None, *, command: str = "/loopbot") -> RenderedMessage:
    """The review message; buttons only while ``post.status == "open"``, ``outcome`` on top once decided.

    ``command`` is the slash command the app answers (``slack.command``), named in the how-to-answer line.
    """
    is_open = post.status == "open"
    title = f"Review {post.review_id}: {post.loop}" + ("" if is_open else f" ({post.status})")
    body: list[dict[str, Any]] = [_header(title)]
    if outcome:
        body.append(_section(f"*{outcome_line(outcome)}*" if "\n" not in outcome else outcome_line(outcome)))
    body += _sections(_headline(post))
    if is_open:
        body.append(_section(_who(post)))
    for extra in (_step_and_failures(post), _state(post), _request_context(post)):
        if extra:
            body += _sections(extra)
    tail: list[dict[str, Any]] = []
    if is_open:
        tail.append(_buttons(post.review_id))
        how = (
            f"Or type `{escape(command)} approve {escape(post.review_id)}` (reject needs a reason), "
            f"or `@loopbot approve` in this thread. Full text: {full_text_pointer(post.review_id)}."
        )
    else:
        how = f"Full text: {full_text_pointer(post.review_id)}."
    tail.append(_context(how))
    state = "needs a decision" if is_open else post.status
    text = _cut(f"Review {post.review_id} ({post.loop}) {state}: {inert(post.request.proposed_action)}", MAX_SECTION)
    return RenderedMessage(text, _limit_blocks(body, tail, post.review_id))


def render_run_parent(loop: str, run_id: str) -> RenderedMessage:
    """The one message per run whose thread holds its reviews."""
    text = f"*{escape(loop)}* run `{escape(run_id)}` started; its reviews and updates are in this thread."
    return RenderedMessage(f"{loop} run {run_id} started", [_section(text)])


def render_update(text: str) -> RenderedMessage:
    """A thread reply: a reminder, the outcome, the run's end."""
    line = outcome_line(text)
    return RenderedMessage(_cut(line, MAX_SECTION), _sections(line)[: MAX_BLOCKS])


def render_escalation(post: ReviewPost, text: str, *, command: str = "/loopbot") -> RenderedMessage:
    """The review again, with the escalation notice on top."""
    review = render_review(post, command=command)
    notice = _sections(f":rotating_light: {outcome_line(text)}")
    blocks = review.blocks[:1] + notice + review.blocks[1:]
    if len(blocks) > MAX_BLOCKS:
        blocks = blocks[: MAX_BLOCKS - 2] + blocks[-2:]
    return RenderedMessage(_cut(f"{inert(text.strip())} - {review.text}", MAX_SECTION), blocks)
