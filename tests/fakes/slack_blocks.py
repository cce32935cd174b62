"""Would Slack take these blocks? ``block_problem``: Slack's documented limits, then slack_sdk's Block Kit models.

The fake Slack answers with it as Slack would (``invalid_blocks`` for a text
object over 3,000 characters, a header over 150, more than 50 blocks, a
block slack_sdk's models refuse; ``msg_blocks_too_long`` past 12,000
characters of block text in one message), so a message loopbot sends that
Slack would refuse fails the test that sent it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from slack_sdk.models.blocks import Block

__all__ = ["MAX_BLOCKS", "MAX_BLOCK_TEXT", "MAX_HEADER", "MAX_TEXT", "block_problem"]

#: Slack's limits on one message (protocols.md): a text object, blocks, block text in all.
MAX_TEXT = 3000
MAX_HEADER = 150
MAX_BLOCKS = 50
MAX_BLOCK_TEXT = 12_000


def _text_objects(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every text object (``{"type": "mrkdwn" | "plain_text", "text": ...}``) in a block, with where it is."""
    if isinstance(value, dict):
        if value.get("type") in ("mrkdwn", "plain_text") and "text" in value:
            yield path, value
        for key, item in value.items():
            yield from _text_objects(item, f"{path}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _text_objects(item, f"{path}[{n}]")


def _block_text(value: Any) -> int:
    if isinstance(value, dict):
        return sum(len(v) if k == "text" and isinstance(v, str) else _block_text(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_block_text(item) for item in value)
    return 0


def block_problem(blocks: Any) -> tuple[str, str] | None:
    """(error, what is wrong) for blocks Slack would refuse, or None: its limits, then slack_sdk's models."""
    if not isinstance(blocks, list):
        return "invalid_blocks_format", "blocks must be a list"
    if len(blocks) > MAX_BLOCKS:
        return "invalid_blocks", f"{len(blocks)} blocks; no more than {MAX_BLOCKS} items allowed"
    for n, block in enumerate(blocks):
        if not isinstance(block, dict):
            return "invalid_blocks", f"blocks[{n}] is not an object"
        for where, text in _text_objects(block, f"blocks[{n}]"):
            limit = MAX_HEADER if block.get("type") == "header" else MAX_TEXT
            shown = text.get("text")
            if not isinstance(shown, str) or not shown:
                return "invalid_blocks", f"{where}.text must be a non-empty string"
            if len(shown) > limit:
                return "invalid_blocks", f"{where}.text: {len(shown)} characters, must be less than {limit + 1}"
        if block.get("type") in ("actions", "context") and not block.get("elements"):
            return "invalid_blocks", f"blocks[{n}].elements must not be empty"
        parsed = Block.parse(block)
        if parsed is None:
            return "invalid_blocks", f"blocks[{n}]: unknown block type {block.get('type')!r}"
        try:
            parsed.validate_json()
        except Exception as err:  # slack_sdk's SlackObjectFormationError and its kin
            return "invalid_blocks", f"blocks[{n}]: {err}"
    total = _block_text(blocks)
    if total > MAX_BLOCK_TEXT:
        return "msg_blocks_too_long", f"{total} characters of block text; at most {MAX_BLOCK_TEXT:,}"
    return None
