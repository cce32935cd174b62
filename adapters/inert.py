"""How does text from loops and outsiders reach people inert? It notifies nobody, links nowhere in disguise.

A review's proposal, context and failures come from the loop (and a triage
loop copies issue titles written by anyone); a reject reason comes from a
voter. loopbot posts all of it in its own voice, so on GitHub none of it may
mention a person or a team, carry a link whose text is not its target, load
an image (a tracking pixel) or pass raw HTML; and no line loopbot writes may
read as a command its own grammar counts (``adapters.commands.parse_comment``).

Mentions and links are neutralised with a WORD JOINER (U+2060), not by
wrapping text in code: GitHub notifies ``@name`` / ``@org/team`` only when the
login's first character directly follows the ``@``, and makes a link or an
image only when ``(``, ``[`` or ``:`` directly follows a ``]``; an invisible
joiner in between breaks both, renders as the very text that was written, and
needs no knowledge of the surrounding Markdown (a backtick wrapper would
break inside a table cell, a link text or an existing code span). A bare URL
is left alone: GitHub links it to itself, so the target is what the reader sees.
Between ``]`` and ``(`` a space follows the joiner, so that the target
(``(https://evil.example/steal)``) is a link of its own instead of the tail
of the URL before it (GitHub's autolinks run up to the next space).
"""

from __future__ import annotations

import re

__all__ = [
    "WORD_JOINER",
    "cut_lines",
    "escape_command_lines",
    "github_markdown",
    "github_text",
    "neutralise_mentions",
    "restore",
]

WORD_JOINER = "\u2060"

#: ``@`` followed by what could start a login, a team (``@org/team``) or a Slack handle (``@here``).
_AT = re.compile(r"@(?=[A-Za-z0-9_-])")
#: A ``]`` that would close a link or an image's text (``](``), a reference (``][``) or a definition (``]:``).
_LINK_CLOSE = re.compile(r"\]([(\[:])")
_OPEN_TARGET = "]" + WORD_JOINER + " ("
#: A joiner in a person's own text, as a character reference (told apart from the joiners added here).
_OWN_JOINER = "&#8288;"
#: An ``&`` that does not start one of the entities loopbot's own escaping writes (``&#64;`` is an ``@``).
_LOOSE_AMP = re.compile(r"&(?!(?:amp|lt|gt|quot|#39|#8288);)")
#: Raw HTML; ``<br>`` (a table cell's line break, written by ``escape_cell``) is the one tag kept.
_TAG_OPEN = re.compile(r"<(?!br>)")
_TAG_CLOSE = re.compile(r"(?<!<br)>")
#: A line that ``parse_comment`` would read as a command: up to three spaces, then ``/`` and a letter.
_COMMAND_LINE = re.compile(r"^( {0,3})/(?=[A-Za-z])", re.MULTILINE)
#: The start of an entity or a ``<br>`` that a cut at the end of the text would leave half.
_HALF_ESCAPE = re.compile(r"&[#\w]*\Z|<\w*\Z")
#: A cut may drop this much of a last line to end on a line's end instead of inside it.
_SHORT_LINE = 2_000


def neutralise_mentions(text: str) -> str:
    """Every ``@name`` with a word joiner after the ``@``: shown the same, notifying nobody."""
    return _AT.sub("@" + WORD_JOINER, text)


def _unlink(match: re.Match[str]) -> str:
    return _OPEN_TARGET if match.group(1) == "(" else "]" + WORD_JOINER + match.group(1)


def _neutralise(text: str) -> str:
    return _LINK_CLOSE.sub(_unlink, neutralise_mentions(text))


def github_text(text: str) -> str:
    """Plain text from a person (a reject reason, a note) for a GitHub comment: no HTML, mention or link.

    A joiner the person wrote becomes ``&#8288;`` (the same invisible
    character), so ``restore`` after ``html.unescape`` gives their text back exactly.
    """
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace(WORD_JOINER, _OWN_JOINER)
    return _neutralise(text)


def github_markdown(markdown: str) -> str:
    """Markdown whose loop text is already escaped (``ReviewRequest.to_markdown()``), made inert for GitHub.

    The escaping it holds stays as it is (``&amp;``, ``&lt;``, ``<br>`` in table
    cells); any other ``&``, ``<`` or ``>`` is escaped, so no tag, image or
    character reference (``&#64;``) gets through; then mentions and links go.
    """
    markdown = _LOOSE_AMP.sub("&amp;", markdown)
    markdown = _TAG_CLOSE.sub("&gt;", _TAG_OPEN.sub("&lt;", markdown))
    return _neutralise(markdown)


def restore(text: str) -> str:
    """``text`` without the joiners (and spaces) added here, to read back what a person wrote (then unescape)."""
    return text.replace(_OPEN_TARGET, "](").replace(WORD_JOINER, "")


def escape_command_lines(text: str) -> str:
    """Every line that reads as ``/command`` written as ``\\/command``: GitHub shows ``/command``, nobody votes."""
    return _COMMAND_LINE.sub(r"\1\\/", text)


def cut_lines(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, at a line's end when that loses no more than a short line.

    Dropping the end of a text never starts a new line, so a long last line
    (a reply that is one line) may be cut inside and end in "…"; only the
    start of a kept part must be a line's start (``truncate_middle``).
    """
    if len(text) <= limit:
        return text
    end = text.rfind("\n", 0, limit + 1)
    if end > 0 and end >= limit - min(_SHORT_LINE, limit // 2):
        return text[:end]
    cut = text[: max(limit - 1, 0)]
    half = _HALF_ESCAPE.search(cut, max(len(cut) - 8, 0))
    if half:  # not half an entity ("&lt" still reads as "<") nor half a "<br>"
        cut = cut[: half.start()]
    return cut + "…"
