"""What does loop text look like in mrkdwn? Escaping, Markdown -> mrkdwn, and the bot's outcome lines.

mrkdwn is not Markdown (protocols.md): ``*bold*`` with single asterisks, no
headings, no tables, and only ``&``, ``<`` and ``>`` need escaping. Loop
text is escaped first (so a failure message cannot ping ``<!channel>``,
``<!here>``, ``<!subteam^…>`` or ``<@U…>``), a plain ``@here`` gets a word
joiner after its ``@`` (``adapters.inert``), then the Markdown a loop may
write is turned into its mrkdwn look-alike - a link as its text and its real
target, never a ``<url|text>`` that hides where it goes. The ``slack:U…``
shorthand becomes a mention only where loopbot itself names the person: the
voters of an outcome line ("Decided: APPROVE by slack:U…"); the reviewers
are mentioned by ``render`` from the review's own list.
"""

from __future__ import annotations

import re

from adapters.channel import Answer
from adapters.inert import neutralise_mentions

__all__ = ["escape", "inert", "is_outcome", "outcome_line", "render_answer", "to_mrkdwn"]

_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.DOTALL)
#: ``[text](url)``; the text holds no ``[`` and both are bounded, so many ``[`` cost a scan each, not the line's rest.
_LINK = re.compile(r"\[([^\[\]\n]{1,300})\]\((https?://[^()\s|]{1,2000})\)")
#: A user or user-group mention, after escaping.
_MENTION = re.compile(r"&lt;(@[UW][A-Z0-9]+|!subteam\^S[A-Z0-9]+)&gt;")
#: The only mentions loopbot writes into an answer (``bot.review_voters.authorize``), after escaping: the refused
#: voter at the start (of a vote's refusal, or run control's: ``bot.desk.control``), and the list of who may
#: answer at the very end. Anywhere else a mention is a voter's text.
_REFUSED_VOTER = re.compile(
    r"\A((?:vote refused: |not started: |cancel refused: )?)&lt;(@[UW][A-Z0-9]+)&gt;"
    r"(?= is not one of this loop's Slack)"
)
_WHO_MAY = re.compile(
    r"(; who may answer: )((?:&lt;(?:@[UW][A-Z0-9]+|!subteam\^S[A-Z0-9]+)&gt;(?:, )?)+)"
    r"(?=(?:; people who may answer: [^\"\n]*)?(?: \(the operators of loop [^()\n]* may[^()\n]*\))?\Z)"
)
_VOTER = re.compile(r"\bslack:([UW][A-Z0-9]+)\b")
_DECIDED = re.compile(
    r"\ADecided: (?P<decision>[A-Z]+) by (?P<who>.+?) at (?P<when>\S+)"
    r"(?P<changes> with changes .+?)?(?: - (?P<note>.*))?\Z",
    re.DOTALL,
)
_TIMED_OUT = re.compile(
    r"\ATimed out: (?P<decision>[A-Z]+) \(default\) at (?P<when>\S+?)\.?(?: (?P<note>.*))?\Z", re.DOTALL
)
_PAST = {"APPROVE": "Approved", "REJECT": "Rejected", "RETRY": "Retry asked", "MODIFY": "Modified", "PAUSE": "Paused"}
_TIMED_OUT_WORD = {
    "APPROVE": "approved", "REJECT": "rejected", "PAUSE": "paused", "RETRY": "retried", "MODIFY": "modified",
}


def escape(text: str) -> str:
    """mrkdwn's three control characters, escaped (and nothing else: mrkdwn has no other escapes)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def inert(text: str) -> str:
    """Text from a loop or a person as mrkdwn that notifies nobody: escaped, and ``@here`` not a handle."""
    return neutralise_mentions(escape(text))


def _link(match: re.Match[str]) -> str:
    """``[text](url)`` as its text and its real target: ``<url>`` shows the address it opens."""
    text, url = match.group(1), match.group(2)
    return f"<{url}>" if text.strip() == url else f"{text} (<{url}>)"


def to_mrkdwn(text: str) -> str:
    """Loop-provided Markdown -> inert mrkdwn: ``**b**`` -> ``*b*``, ``# h`` -> ``*h*``, ``[t](u)`` -> ``t (<u>)``."""
    text = inert(text)
    text = _HEADING.sub(lambda m: f"*{m.group(1).strip()}*", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", text)
    return _LINK.sub(_link, text)


def _mention(voters: str) -> str:
    """The voter list loopbot wrote ("slack:U0AAA, github:bob") with each ``slack:U…`` as a mention."""
    return _VOTER.sub(lambda m: f"<@{m.group(1)}>", inert(voters))


def is_outcome(text: str) -> bool:
    """Is this the bot's outcome text ("Decided: ..." / "Timed out: ...") rather than a reminder or a run's end?"""
    return bool(_DECIDED.match(text.strip()) or _TIMED_OUT.match(text.strip()))


def _restore(match: re.Match[str]) -> str:
    return match.group(1) + _MENTION.sub(r"<\1>", match.group(2))


def render_answer(answer: Answer) -> str:
    """What a voter is told, as mrkdwn: escaped but for the mentions loopbot wrote; column lines go in a code block.

    Answers echo what voters wrote (a command's words, a modify's changes,
    another voter's proposed changes), so a mention is made live only where
    loopbot itself names people: the refused voter and who may answer.
    """
    text = escape(answer.text.strip())
    text = _REFUSED_VOTER.sub(lambda m: f"{m.group(1)}<{m.group(2)}>", text)
    text = _WHO_MAY.sub(_restore, text)
    first, _, rest = text.partition("\n")
    if any(line.startswith("  ") for line in rest.splitlines()):
        return f"{first}\n```{rest}```"
    return text


def outcome_line(text: str) -> str:
    """The bot's outcome text as a person reads it: "Approved by <@U0AAA>: note", "Timed out → rejected".

    The voters an outcome names (``by slack:U…, …``, written by loopbot)
    become mentions; the note and any other text (a reminder, the run's end
    with the loop's result, a vote history with voters' notes) stay inert,
    ``slack:U…`` included.
    """
    text = text.strip()
    decided = _DECIDED.match(text)
    if decided:
        who = _mention(decided.group("who"))
        line = f"{_PAST.get(decided.group('decision'), decided.group('decision').capitalize())} by {who}"
        if decided.group("changes"):
            line += inert(decided.group("changes"))
        if decided.group("note"):
            line += f": {to_mrkdwn(decided.group('note'))}"
        return line
    timed_out = _TIMED_OUT.match(text)
    if timed_out:
        decision = timed_out.group("decision")
        line = f"Timed out → {_TIMED_OUT_WORD.get(decision, decision.lower())}"
        return line + (f": {to_mrkdwn(timed_out.group('note'))}" if timed_out.group("note") else "")
    return to_mrkdwn(text)
