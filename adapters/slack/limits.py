"""How much may one Slack message hold? Block Kit's limits, and cutting or splitting text to fit them.

Slack refuses a whole message over a limit (protocols.md): a text object
over 3,000 characters (``invalid_blocks``), more than 50 blocks, or more
block text in one message than about 12,000 characters
(``msg_blocks_too_long``). A refused review never appears and a refused
update is retried for ever, so every renderer keeps within these limits,
with room to spare on the total (``MAX_MESSAGE_TEXT``).

Text here is already escaped mrkdwn: a cut or a split never lands inside an
entity (``&amp;`` would show as ``&am``) or a ``<…>`` link loopbot wrote.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = [
    "MAX_BLOCKS",
    "MAX_HEADER",
    "MAX_MESSAGE_TEXT",
    "MAX_TEXT",
    "block_text",
    "cut",
    "split_text",
]

#: One text object (a section's text, a context element): Slack's ``invalid_blocks`` above this.
MAX_TEXT = 3000
#: A header's plain text.
MAX_HEADER = 150
#: Blocks in one message.
MAX_BLOCKS = 50
#: Block text in one message: Slack answers ``msg_blocks_too_long`` from about 12,000; this leaves room.
MAX_MESSAGE_TEXT = 11_000

#: The start of an entity, or of a ``<…>`` link, that a cut at the end would leave half.
_HALF = re.compile(r"&[#\w]*\Z|<[^<>]*\Z")


def block_text(blocks: Iterable[dict[str, Any]]) -> int:
    """The characters of every ``text`` string in ``blocks``: what ``msg_blocks_too_long`` counts."""
    return sum(_text_length(block) for block in blocks)


def _text_length(value: Any) -> int:
    if isinstance(value, dict):
        return sum(len(item) if key == "text" and isinstance(item, str) else _text_length(item)
                   for key, item in value.items())
    if isinstance(value, list):
        return sum(_text_length(item) for item in value)
    return 0


def _safe_end(text: str, end: int) -> int:
    """``end``, moved back so that ``text[:end]`` ends neither inside an entity nor inside a ``<…>`` link."""
    half = _HALF.search(text[:end], max(end - 2100, 0))
    if half and half.start() > 0:
        return half.start()
    return end


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, ending in "…" when it was cut (never half an entity)."""
    if len(text) <= limit:
        return text
    return text[: _safe_end(text, max(limit - 1, 1))] + "…"


def split_text(text: str, limit: int) -> list[str]:
    """``text`` whole, in pieces of at most ``limit`` characters: at line ends, else at a space, else anywhere safe.

    Nothing is dropped: joining the pieces with the line ends they were split
    at gives ``text`` back (a piece split inside a line carries on in the next).
    """
    return list(_pieces(text, limit)) or [""]


def _pieces(text: str, limit: int) -> Iterator[str]:
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            if current:
                yield current
                current = ""
            end = _safe_end(line, limit)
            space = line.rfind(" ", limit // 2, end + 1)
            end = space if space > 0 else end
            yield line[:end]
            line = line[end:]
        if current and len(current) + 1 + len(line) > limit:
            yield current
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current.strip():
        yield current
