"""What does a review look like in Slack? ``ReviewPost`` -> Block Kit messages in mrkdwn, within Slack's limits.

A person opening the review reads, in this order: what is asked (the
proposal's summary, "Approve to apply 91 label changes to octo/ops", or the
request's reason), the proposal itself (``proposal_view``), who may answer
and how on Slack (the buttons, the slash command, an @-mention in the
thread; every user and user group named, and how many must agree), then the
engine's diagnostics collapsed into a context block, in words for people.

Nothing is cut silently (``limits``): a proposal too long for the message
goes on in further thread replies (``RenderedMessage.more``), and one too
long for a few replies is uploaded whole to the thread as files
(``RenderedMessage.files``: markdown, and each table as CSV), the message
saying where the rest is. An outcome's long reason is cut with "…" in the
review message; the thread reply with the outcome holds it whole, split over
as many replies as it needs.

Everything that came from the loop or a voter is inert (``mrkdwn.inert``):
no ``<!channel>``, ``<!subteam^…>`` or ``<@U…>`` from it pings anyone, and a
link shows its real target. The reviewers loopbot names (and an outcome's
voters) are the only mentions; text objects are ``verbatim``, so Slack links
no bare URL or ``#channel`` on its own. No path on the bot's server is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapters.channel import ReviewPost
from loop_engine.proposal import Table

from .diagnostics import diagnostics
from .limits import MAX_BLOCKS, MAX_HEADER, MAX_MESSAGE_TEXT, MAX_TEXT, block_text, cut, split_text
from .mrkdwn import escape, inert, outcome_line
from .proposal_view import SlackFile, proposal_files, proposal_pieces

__all__ = [
    "ACTION_IDS",
    "ACTION_PREFIX",
    "MAX_BLOCKS",
    "MAX_HEADER",
    "MAX_MESSAGE_TEXT",
    "MAX_SECTION",
    "RenderedMessage",
    "SlackFile",
    "render_escalation",
    "render_review",
    "render_run_parent",
    "render_update",
]

MAX_SECTION = MAX_TEXT
#: How much of an outcome (its reason) the review message shows; the thread reply has it whole.
MAX_OUTCOME = 1500
#: Further thread replies a proposal may take; past that it is uploaded as files instead.
MAX_REPLIES = 6
#: The fallback ``text`` (notifications, screen readers).
MAX_FALLBACK = 300
#: The question on top; a longer one is cut there and shown whole after it.
MAX_ASKED = 1500
#: Who may answer, listed.
MAX_WHO = 1800

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
#: A review's status as the title says it.
_STATUS_WORDS = {"open": "waiting for a decision", "decided": "decided", "applied": "applied",
                 "failed": "applying it failed"}


@dataclass(frozen=True)
class RenderedMessage:
    """``text`` is the notification / fallback line; ``blocks`` what Slack shows.

    ``more`` are further thread replies that carry on where this message
    stops (in order), ``files`` what is uploaded to the thread after them.
    """

    text: str
    blocks: list[dict[str, Any]]
    more: tuple[RenderedMessage, ...] = ()
    files: tuple[SlackFile, ...] = field(default=())


# --- blocks ------------------------------------------------------------------------
def _mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn text object Slack does not pre-process: only the markup loopbot wrote links or mentions."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _sections(text: str) -> list[dict[str, Any]]:
    """``text`` whole, in as many sections as it needs."""
    return [_section(piece) for piece in split_text(text, MAX_TEXT) if piece.strip()]


def _header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": {"type": "plain_text", "text": cut(text, MAX_HEADER), "emoji": True}}


def _context(texts: Iterable[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [_mrkdwn(cut(text, MAX_TEXT)) for text in texts][:10]}


def _buttons(review_id: str) -> dict[str, Any]:
    elements = []
    for label, action_id in ACTION_IDS.items():
        button: dict[str, Any] = {
            "type": "button",
            "action_id": action_id,
            "value": review_id[:2000],
            "text": {"type": "plain_text", "text": label},
        }
        if label in _BUTTON_STYLE:
            button["style"] = _BUTTON_STYLE[label]
        elements.append(button)
    return {"type": "actions", "block_id": f"loopbot_review:{review_id}"[:255], "elements": elements}


def _fallback(text: str) -> str:
    return cut(" ".join(text.split()), MAX_FALLBACK) or "loopbot"


# --- what is asked, and who may answer ------------------------------------------------
def _asked(post: ReviewPost) -> str:
    """The question in one line: the proposal's summary, else the loop's reason, else its proposed action."""
    request = post.request
    if request.proposal is not None:
        return request.proposal.summary
    reason = request.context.get("reason")
    if isinstance(reason, str) and reason.strip():
        return reason
    return request.proposed_action or "A decision is needed"


def _who(post: ReviewPost) -> str:
    """Every user and user group that may answer on Slack (ids: ``U…``/``W…`` users, ``S…`` groups), N of M."""
    named = tuple(post.reviewers.get("slack", ()))
    users = [name for name in named if not name.startswith("S")]
    groups = [name for name in named if name.startswith("S")]
    need = post.approvals_required
    approvals = f"{need} approval{'s' if need != 1 else ''} needed"
    if named:
        # groups first: they are few, and a long list of users must not push them out of sight
        mentions = [*(f"members of <!subteam^{escape(g)}>" for g in groups), *(f"<@{escape(u)}>" for u in users)]
        shown = _fitting(mentions, MAX_WHO)
        who = ", ".join(shown) + (f" and {len(mentions) - len(shown)} more" if len(shown) < len(mentions) else "")
        count = f"{need} of {len(users)} must approve" if users and not groups and len(users) > 1 else approvals
        return f"*Who can answer:* {who} ({count})"
    if post.reviewers_hint:
        return f"*Who can answer:* {cut(inert(post.reviewers_hint), MAX_WHO)} ({approvals})"
    if post.restricted:
        return f"*Who can answer:* nobody on Slack is named for this review ({approvals} elsewhere)"
    return f"*Who can answer:* anyone in this channel ({approvals})"


def _fitting(mentions: list[str], room: int) -> list[str]:
    """The leading mentions that fit in ``room`` characters (a mention is never cut: it would ping no one)."""
    kept: list[str] = []
    for mention in mentions:
        if sum(len(m) + 2 for m in kept) + len(mention) > room:
            break
        kept.append(mention)
    return kept


def _how(post: ReviewPost, command: str) -> str:
    review = escape(post.review_id)
    slash = escape(command)
    return (f"Press a button below, or type `{slash} approve {review}` (`{slash} reject {review} &lt;reason&gt;` "
            f"to reject), or write `@loopbot approve` in this thread.")


# --- fitting a message ---------------------------------------------------------------------
# Each block's text is measured once (``_sizes``) and messages are filled with running totals, so
# fitting a proposal of n blocks costs n, not n times the blocks of a message.
def _fits(blocks: Sequence[dict[str, Any]]) -> bool:
    return len(blocks) <= MAX_BLOCKS and block_text(blocks) <= MAX_MESSAGE_TEXT


def _sizes(blocks: Sequence[dict[str, Any]]) -> list[int]:
    """Each block's text as ``msg_blocks_too_long`` counts it."""
    return [block_text((block,)) for block in blocks]


def _pack(blocks: Sequence[dict[str, Any]], sizes: Sequence[int], label: str,
          most: int | None = None) -> list[list[dict[str, Any]]]:
    """``blocks`` (of text ``sizes``) over as many messages as they need, each opening with a context line
    "``label``, part k of n"; past ``most`` messages it stops, the ones it filled being of no use."""
    room = _context([f"{label}, part 0000 of 0000"])
    blocks_left, text_left = MAX_BLOCKS - 1, MAX_MESSAGE_TEXT - block_text((room,))
    pages: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    used = 0
    for block, size in zip(blocks, sizes, strict=True):
        if current and (len(current) + 1 > blocks_left or used + size > text_left):
            pages.append(current)
            current, used = [], 0
            if most is not None and len(pages) > most:
                break
        current.append(block)
        used += size
    if current:
        pages.append(current)
    return [[_context([f"{label}, part {n} of {len(pages)}"]), *page] for n, page in enumerate(pages, 1)]


def _spread(head: list[dict[str, Any]], body: list[dict[str, Any]], tail: list[dict[str, Any]],
            post: ReviewPost) -> tuple[list[dict[str, Any]], tuple[RenderedMessage, ...], tuple[SlackFile, ...]]:
    """The review's blocks, the replies that carry the rest of its proposal, and the files that hold it all."""
    sizes = _sizes(body)
    if len(head) + len(body) + len(tail) <= MAX_BLOCKS and \
            block_text([*head, *tail]) + sum(sizes) <= MAX_MESSAGE_TEXT:
        return [*head, *body, *tail], (), ()
    note = _section("_" + "x" * 400 + "_")
    blocks_used, text_used = len(head) + 1 + len(tail), block_text([*head, note, *tail])
    shown = 0
    for size in sizes:  # the proposal's start, as much as fits beside the note saying where the rest is
        if blocks_used + 1 > MAX_BLOCKS or text_used + size > MAX_MESSAGE_TEXT:
            break
        blocks_used, text_used, shown = blocks_used + 1, text_used + size, shown + 1
    label = f"Review {inert(post.review_id)}: the proposal, continued"
    proposal = post.request.proposal
    pages = _pack(body[shown:], sizes[shown:], label, most=None if proposal is None else MAX_REPLIES)
    if len(pages) <= MAX_REPLIES or proposal is None:
        fallback = inert(_fallback(f"Review {post.review_id}: the proposal, continued"))
        more = tuple(RenderedMessage(fallback, page) for page in pages)
        words = f"_The proposal goes on in the next {len(pages)} repl{'y' if len(pages) == 1 else 'ies'} " \
                f"in this thread._"
        return [*head, *body[:shown], _section(words), *tail], more, ()
    files = tuple(proposal_files(post.review_id, proposal))
    rows = sum(len(s.rows) for s in proposal.sections if isinstance(s, Table))
    counted = f" ({rows:,} table rows in all)" if rows else ""
    names = ", ".join(f"`{escape(f.filename)}`" for f in files)
    named = f"the files {names}" if len(names) <= 250 else f"the {len(files)} files uploaded"
    words = f"_This is the start of the proposal{counted}. The whole proposal is in {named} in this thread._"
    return [*head, *body[:shown], _section(words), *tail], (), files


# --- the renderers -------------------------------------------------------------------------
def _outcome_shown(outcome: str) -> str:
    line = outcome_line(outcome)
    if len(line) <= MAX_OUTCOME and "\n" not in line:
        return f"*{line}*"
    return cut(line, MAX_OUTCOME) + "\n_The whole outcome is in this thread._"


def _review(post: ReviewPost, outcome: str | None, command: str, notice: str = "") -> RenderedMessage:
    is_open = post.status == "open"
    title = f"Review {post.review_id}: {post.loop}"
    if not is_open:
        title += f" ({_STATUS_WORDS.get(post.status, post.status)})"
    head: list[dict[str, Any]] = [_header(title)]
    if notice:
        head += _sections(f":rotating_light: {cut(outcome_line(notice), MAX_OUTCOME)}")
    if outcome:
        head.append(_section(_outcome_shown(outcome)))
    asked = inert(" ".join(_asked(post).split()))
    head.append(_section(f"*{cut(asked, MAX_ASKED)}*"))
    head += [_section(f"<{post.page_url}|Whole proposal and history>")] if post.page_url else []
    body = _sections(f"The whole question: {asked}") if len(asked) > MAX_ASKED else []
    if post.request.proposal is not None:
        body += [_section(piece) for piece in proposal_pieces(post.request.proposal)]
    tail: list[dict[str, Any]] = []
    if is_open:
        tail += [_section(f"{_who(post)}\n{_how(post, command)}"), _buttons(post.review_id)]
    tail.append(_context(diagnostics(post, is_open)))
    blocks, more, files = _spread(head, body, tail, post)
    state = "needs a decision" if is_open else _STATUS_WORDS.get(post.status, post.status)
    text = _fallback(f"{notice.strip()} - " * bool(notice) + f"Review {post.review_id} ({post.loop}) {state}: "
                     f"{_asked(post)}")
    return RenderedMessage(inert(text), blocks, more, files)


def render_review(post: ReviewPost, outcome: str | None = None, *, command: str = "/loopbot") -> RenderedMessage:
    """The review message; buttons only while ``post.status == "open"``, ``outcome`` on top once decided.

    ``command`` is the slash command the app answers (``slack.command``), named in the how-to-answer line.
    """
    return _review(post, outcome, command)


def render_run_parent(loop: str, run_id: str) -> RenderedMessage:
    """The one message per run whose thread holds its reviews."""
    text = f"*{inert(loop)}* run `{inert(run_id)}` started; its reviews and updates are in this thread."
    return RenderedMessage(inert(_fallback(f"{loop} run {run_id} started")), [_section(cut(text, MAX_TEXT))])


def render_update(text: str) -> RenderedMessage:
    """A thread reply (a reminder, the outcome, the run's end) whole: what one message cannot hold goes in ``more``."""
    line = outcome_line(text)
    blocks = _sections(line) or [_section("-")]
    fallback = _fallback(line)
    if _fits(blocks):
        return RenderedMessage(fallback, blocks)
    pages = _pack(blocks, _sizes(blocks), "loopbot")
    first, *rest = (RenderedMessage(fallback, page) for page in pages)
    return RenderedMessage(first.text, first.blocks, tuple(rest))


def render_escalation(post: ReviewPost, text: str, *, command: str = "/loopbot") -> RenderedMessage:
    """The review again, with the escalation notice on top (and its proposal's rest in its own thread)."""
    return _review(post, None, command, notice=text)
