"""What does a review look like on GitHub? Comments under GitHub's size cap, read in the order a person decides.

The review comment says, in this order: what is asked (the proposal's
summary, else the loop's reason), the proposal - whole -, who may answer and
how on this issue, then the diagnostics collapsed in ``<details>``. A
hidden ``<!-- loopbot:review=ID -->`` marker lets the channel find it again
after a crash. A proposal too long for one comment goes on in further
comments (``review_parts``), each marked ``<!-- loopbot:more=ID.N -->`` and
saying "part 2 of 3", a table's header repeated at the top of each part; no
text is ever cut silently and no path of the server is ever shown. Once the
review is no longer open the comment is re-rendered with an "Outcome"
section instead of "How to answer"; an outcome longer than
``OUTCOME_ENTRY_CHARS`` is cut there with "…" and posted whole as a comment
of its own (``outcome_is_cut`` tells the channel).

Everything a loop or a voter wrote passes through ``adapters.inert`` (no
mention, disguised link, image or HTML of theirs), and every comment is
finished by ``fit_comment``: cut at line ends to GitHub's cap, with no line
that ``parse_comment`` would count, so the bot never reads its own text as a vote.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Sequence

from loop_engine.markdown import escape_inline

from ..channel import ReviewPost
from ..inert import cut_lines, escape_command_lines, github_markdown, github_text, restore
from ..review_text import asked, diagnostics_lines, proposal_lines

__all__ = [
    "MAX_COMMENT_CHARS",
    "OUTCOME_ENTRY_CHARS",
    "OUTCOME_HEADING",
    "answer_marker",
    "escalation_marker",
    "fit_comment",
    "more_marker",
    "outcome_is_cut",
    "outcome_key",
    "outcomes_in",
    "render_escalation",
    "render_more",
    "render_review",
    "render_update",
    "review_parts",
    "review_marker",
    "run_marker",
    "split_markdown",
    "truncate_middle",
    "update_parts",
]

#: GitHub refuses comment bodies over 65,536 characters; stay well below it.
MAX_COMMENT_CHARS = 65_000
#: How much of the proposal the review comment itself holds; the rest goes on in further comments.
FIRST_PART_CHARS = 40_000
#: How much of it each further comment holds (its header and continuation note fit beside).
MORE_PART_CHARS = 63_000
#: The longest outcome entry the review comment shows; a longer one is cut with "…" and posted whole.
OUTCOME_ENTRY_CHARS = 1_500
#: The longest "what is asked" heading; a longer one is cut and shown whole right under it.
_ASKED_CHARS = 1_000
#: The most the collapsed diagnostics take of the review comment.
_DETAILS_CHARS = 12_000
OUTCOME_HEADING = "## Outcome"
_OUTCOME_ENTRY = re.compile(
    r"<!-- loopbot:outcome(?:=(?P<key>[0-9a-f]+))? -->\n(?P<text>.*?)\n<!-- /loopbot:outcome -->", re.DOTALL)
_CUT_NOTE = " … (cut here: the whole text is in a comment below)"


def review_marker(review_id: str) -> str:
    return f"<!-- loopbot:review={review_id} -->"


def escalation_marker(review_id: str) -> str:
    return f"<!-- loopbot:escalation={review_id} -->"


def more_marker(review_id: str, part: int, kind: str = "review") -> str:
    """The marker of part ``part`` (2, 3, ...) of a review's (or an escalation's) proposal."""
    return f"<!-- loopbot:more={review_id}.{kind}.{part} -->"


def run_marker(run_id: str) -> str:
    return f"<!-- loopbot:run={run_id} -->"


def answer_marker(key: str) -> str:
    return f"<!-- loopbot:answer={key} -->"


def truncate_middle(text: str, limit: int, note: str) -> str:
    """``text`` cut to ``limit`` characters by dropping whole lines from its middle and saying so (``note``).

    Both cuts fall on line ends: a cut inside a line would start a new one
    with whatever came next, a ``/yes`` of the loop's text included.
    """
    if len(text) <= limit:
        return text
    shown = f"\n\n> … {len(text) - limit + len(note) + 32:,} characters left out: {note}\n\n"
    keep = max(limit - len(shown), 0)
    head = cut_lines(text, keep * 2 // 3)
    start = text.find("\n", len(text) - (keep - len(head)))
    tail = text[start + 1:] if start != -1 else ""
    return head + shown + tail


def fit_comment(body: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """A comment as loopbot posts it: command-looking lines escaped, cut at a line end to ``limit``, escaped again.

    Escaping first makes the length final; the second pass (after cutting)
    is what guarantees no line of the posted comment reads as a command.
    """
    return escape_command_lines(cut_lines(escape_command_lines(body), limit))


# --- splitting a long text into comments ---------------------------------------------------------------------------
def _pieces(line: str, limit: int) -> list[str]:
    """A line longer than ``limit`` in pieces of at most ``limit`` (never ending inside an ``&...;`` entity)."""
    pieces = []
    while len(line) > limit:
        end = limit
        amp = line.rfind("&", end - 8, end)
        if amp > 0 and ";" not in line[amp:end]:
            end = amp
        pieces.append(line[:end])
        line = line[end:]
    return [*pieces, line]


def _fence(line: str) -> bool:
    return line.lstrip().startswith(("```", "~~~"))


def split_markdown(text: str, first: int, rest: int) -> list[str]:
    """``text`` in parts of at most ``first`` (then ``rest``) characters, cut at line ends.

    A part that starts inside a table repeats the table's header and rule
    line, one that starts inside a fenced block reopens it (and the part
    before closes it), so every part reads on its own.
    """
    parts: list[str] = []
    current: list[str] = []
    size = 0
    header: list[str] = []  # the table the lines are in (its header and rule), if any
    fence = ""  # the fence line of the code block the lines are in, if any
    previous = ""
    for whole in text.split("\n"):
        if whole.startswith("|") and not previous.startswith("|"):
            header = [whole]
        elif whole.startswith("|") and len(header) == 1 and previous == header[0]:
            header.append(whole)
        elif not whole.startswith("|"):
            header = []
        previous = whole
        limit = first if not parts else rest
        for line in _pieces(whole, max(limit // 2, 1)):
            if current and size + len(line) + 1 > limit - 8:
                parts.append("\n".join([*current, "```"] if fence else current))
                reopen = [fence] if fence else (header if header and line not in header else [])
                current, size = list(reopen), sum(len(x) + 1 for x in reopen)
                limit = rest
            current.append(line)
            size += len(line) + 1
        if _fence(whole):
            fence = "" if fence else whole.strip()
    parts.append("\n".join(current))
    return parts


# --- the review comment ---------------------------------------------------------------------------------------------
def _inert(markdown: str) -> str:
    """Escaped markdown made inert for GitHub, its command-looking lines escaped (so its length is final)."""
    return escape_command_lines(github_markdown(markdown))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def review_parts(post: ReviewPost) -> list[str]:
    """The proposal (and an asked line too long for its heading) as the parts the comments hold, in order."""
    lines: list[str] = []
    what = asked(post.request)
    if len(what) > _ASKED_CHARS:
        lines += [escape_inline(what), ""]
    lines += proposal_lines(post.request)
    if not lines:
        return [""]
    return split_markdown(_inert("\n".join(lines).strip("\n")), FIRST_PART_CHARS, MORE_PART_CHARS)


def _team(name: str) -> bool:
    return "/" in name


def _who(post: ReviewPost) -> str:
    names = post.reviewers.get("github") or ()
    n = post.approvals_required
    approvals = f"{n} approval{'s' if n != 1 else ''}"
    # the reviewers loopbot itself names: the one mention a review makes
    people = [f"team @{name.lstrip('@')}" if _team(name) else f"@{name.lstrip('@')}" for name in names]
    permission = escape_inline(post.min_permission)
    if people and post.min_permission:  # both: those of them with the permission
        return f"needs {approvals} of: {', '.join(people)} (with {permission} permission on this repository)"
    if post.min_permission:
        return f"needs {approvals} of: anyone with {permission} permission on this repository"
    if people and not any(_team(name) for name in names):
        return f"needs {approvals} of these {len(people)}: {', '.join(people)}"
    if people:
        return f"needs {approvals} of: {', '.join(people)}"
    if post.reviewers_hint:
        return f"needs {approvals} of: {github_text(' '.join(post.reviewers_hint.split()))}"
    if post.restricted:
        return f"needs {approvals} of: only the loop's named reviewers"
    return f"needs {approvals} of: anyone who can comment here"


def _how_to_answer(post: ReviewPost) -> list[str]:
    # List items, never lines that start with "/": the bot's own text must not read as a command.
    return [
        "## How to answer",
        "",
        f"**Who can answer:** {_who(post)}",
        "",
        "Comment on this issue with one of these commands, each on a line of its own "
        "(the review id is optional here):",
        "",
        f"- `/approve [note]` (or `/approve {post.review_id}`)",
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


def outcome_is_cut(text: str) -> bool:
    """Is ``text`` too long to show whole in the review comment's outcome (so it is posted whole on its own)?"""
    return len(_escape_block(text)) > OUTCOME_ENTRY_CHARS


def _shown_outcome(text: str) -> str:
    """``text`` as the outcome section shows it: whole, or cut to fit with "…" saying where the whole is."""
    if not outcome_is_cut(text):
        return text.strip()
    keep = OUTCOME_ENTRY_CHARS - len(_CUT_NOTE)
    while keep > 0 and len(_escape_block(text[:keep] + _CUT_NOTE)) > OUTCOME_ENTRY_CHARS:
        keep = keep * 3 // 4
    return text[:keep].rstrip() + _CUT_NOTE


def _outcome_section(post: ReviewPost, outcomes: Sequence[tuple[str, str]]) -> list[str]:
    lines = [OUTCOME_HEADING, ""]
    for key, text in outcomes:
        lines += [f"<!-- loopbot:outcome={key} -->", _escape_block(_shown_outcome(text)),
                  "<!-- /loopbot:outcome -->", ""]
    if not outcomes:
        lines += [f"This review is {escape_inline(post.status)}.", ""]
    return lines


def outcomes_in(body: str) -> list[tuple[str, str]]:
    """The outcome entries (key, text) an earlier render wrote into ``body`` (to add one, not replace them)."""
    found = []
    for match in _OUTCOME_ENTRY.finditer(body):
        text = html.unescape(restore(_ESCAPED_SLASH.sub(r"\1/", match.group("text"))))
        found.append((match.group("key") or outcome_key(text), text))
    return found


def outcome_key(text: str) -> str:
    """The key an outcome entry is known by: its whole text's digest, so a cut entry is still found again."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _details(post: ReviewPost, room: int) -> str:
    lines = diagnostics_lines(post.request, is_open=post.status == "open")
    shown = truncate_middle(_inert("\n".join(lines)), max(min(room, _DETAILS_CHARS), 0), "of the details")
    return f"<details><summary>Details</summary>\n\n{shown}\n\n</details>"


def _continued(part: int, total: int) -> str:
    return f"> **Continued in the next comment** (part {part + 1} of {total})."


def _first(post: ReviewPost, marker: str, parts: Sequence[str], tail: Sequence[str]) -> str:
    total = len(parts)
    title = (f"**loopbot review `{post.review_id}`** · loop `{escape_inline(post.loop)}`"
             f" · run `{escape_inline(post.run_id)}`" + (f" · part 1 of {total}" if total > 1 else ""))
    heading = _inert(escape_inline(_cut(asked(post.request), _ASKED_CHARS)))
    body = [marker, title, "", f"## {heading}", ""]
    body += [f"[Whole proposal and history]({post.page_url})", ""] if post.page_url else []
    if parts[0]:
        body += [parts[0], ""]
    if total > 1:
        body += [_continued(1, total), ""]
    text = "\n".join([*body, *tail]).rstrip() + "\n\n"
    return fit_comment(text + _details(post, MAX_COMMENT_CHARS - len(text) - 64))


def render_review(post: ReviewPost, outcomes: Sequence[tuple[str, str]] = ()) -> str:
    """The review comment; ``outcomes`` (when the review is closed) replace "How to answer"."""
    is_open = post.status == "open" and not outcomes
    tail = _how_to_answer(post) if is_open else _outcome_section(post, outcomes)
    return _first(post, review_marker(post.review_id), review_parts(post), tail)


def render_more(post: ReviewPost, parts: Sequence[str], part: int, kind: str = "review") -> str:
    """Comment ``part`` (2, 3, ...) of ``parts``: its marker, which part of which review, the text, what follows."""
    total = len(parts)
    lines = [more_marker(post.review_id, part, kind),
             f"**loopbot review `{post.review_id}`**: the proposal, part {part} of {total} "
             "(continued from the comment above)", "", parts[part - 1]]
    if part < total:
        lines += ["", _continued(part, total)]
    return fit_comment("\n".join(lines) + "\n")


def render_escalation(post: ReviewPost, text: str) -> str:
    """An escalation notice: ``text`` on top (cut to a line's worth), then the review as it stands."""
    notice = f"**{github_text(_cut(' '.join(text.split()), _ASKED_CHARS))}**"  # the bot's one line: short
    return _first(post, f"{escalation_marker(post.review_id)}\n{notice}\n", review_parts(post),
                  _how_to_answer(post))


def update_parts(post: ReviewPost, marker: str, text: str, url: str | None = None) -> list[str]:
    """A reply comment (a reminder, an outcome, the run's end): ``text`` inert and whole, in as many comments as needed.

    The first comment carries ``marker``, each further one ``marker`` with
    its part number; a one-line text stays on the line after the link.
    """
    link = f"review `{post.review_id}`"
    if url:
        link = f"[{link}]({url})"
    shown = _escape_block(text)
    lead = f"**loopbot** {link}:"
    pieces = split_markdown(shown, MORE_PART_CHARS - 400 - len(lead), MORE_PART_CHARS - 400)
    total = len(pieces)
    bodies = []
    for n, piece in enumerate(pieces, 1):
        own = marker if n == 1 else marker.replace(" -->", f":{n} -->")
        which = f" (part {n} of {total})" if total > 1 else ""
        joiner = " " if "\n" not in piece and n == 1 else "\n\n"
        body = f"{own}\n{lead}{which}{joiner}{piece}"
        if n < total:
            body += "\n\n" + _continued(n, total)
        bodies.append(fit_comment(body))
    return bodies


def render_update(post: ReviewPost, marker: str, text: str, url: str | None = None) -> str:
    """The first comment of ``update_parts`` (all there is for any text under ~60 kB)."""
    return update_parts(post, marker, text, url)[0]
