"""What does loop text look like in mrkdwn? Escaping, Markdown -> mrkdwn, and the bot's outcome lines.

mrkdwn is not Markdown (protocols.md): ``*bold*`` with single asterisks, no
headings, no tables, and only ``&``, ``<`` and ``>`` need escaping. Loop
text is escaped first (so a failure message cannot ping ``<!channel>``),
then the Markdown a loop may write is turned into its mrkdwn look-alike.
"""

from __future__ import annotations

import re

from adapters.channel import Answer

__all__ = ["escape", "is_outcome", "outcome_line", "render_answer", "to_mrkdwn"]

_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__", re.DOTALL)
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
#: A user or user-group mention the bot wrote into an answer ("who may answer: <@U0AAA>"), after escaping.
_MENTION = re.compile(r"&lt;(@[UW][A-Z0-9]+|!subteam\^S[A-Z0-9]+)&gt;")
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


def to_mrkdwn(text: str) -> str:
    """Loop-provided Markdown -> escaped mrkdwn: ``**b**`` -> ``*b*``, ``# h`` -> ``*h*``, ``[t](url)`` -> link."""
    text = escape(text)
    text = _HEADING.sub(lambda m: f"*{m.group(1).strip()}*", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", text)
    return _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1)}>", text)


def is_outcome(text: str) -> bool:
    """Is this the bot's outcome text ("Decided: ..." / "Timed out: ...") rather than a reminder or a run's end?"""
    return bool(_DECIDED.match(text.strip()) or _TIMED_OUT.match(text.strip()))


def render_answer(answer: Answer) -> str:
    """What a voter is told, as mrkdwn: escaped but for user and group mentions; column lines go in a code block."""
    text = _MENTION.sub(r"<\1>", escape(answer.text.strip()))
    first, _, rest = text.partition("\n")
    if any(line.startswith("  ") for line in rest.splitlines()):
        return f"{first}\n```{rest}```"
    return text


def outcome_line(text: str) -> str:
    """The bot's outcome text as a person reads it: "Approved by <@U0AAA>: note", "Timed out → rejected".

    Other texts (a reminder, the run's end) are shown as given; voter ids
    ``slack:U…`` always become mentions.
    """
    text = text.strip()
    decided = _DECIDED.match(text)
    if decided:
        who = _VOTER.sub(lambda m: f"<@{m.group(1)}>", escape(decided.group("who")))
        line = f"{_PAST.get(decided.group('decision'), decided.group('decision').capitalize())} by {who}"
        if decided.group("changes"):
            line += escape(decided.group("changes"))
        if decided.group("note"):
            line += f": {to_mrkdwn(decided.group('note'))}"
        return line
    timed_out = _TIMED_OUT.match(text)
    if timed_out:
        decision = timed_out.group("decision")
        line = f"Timed out → {_TIMED_OUT_WORD.get(decision, decision.lower())}"
        return line + (f": {to_mrkdwn(timed_out.group('note'))}" if timed_out.group("note") else "")
    return _VOTER.sub(lambda m: f"<@{m.group(1)}>", to_mrkdwn(text))
