"""The escaping every rendered text goes through, and the tables built from it.

Proposals, review texts, the audit and every channel render with these, so
outsider text reaches people inert: no HTML, no fake markers, no broken table.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

__all__ = ["escape_inline", "escape_cell", "show_value", "render_table"]


def escape_inline(text: str) -> str:
    """Text safe inside a markdown line: no HTML (so no fake markers), no line breaks."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


def escape_cell(text: str, limit: int | None = None) -> str:
    """Text safe inside a table cell: ``|`` escaped and newlines as ``<br>``."""
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("|", "\\|")
    return "<br>".join(text.splitlines()) if ("\n" in text or "\r" in text) else text


def show_value(value: Any) -> str:
    """Unescaped display text: strings as they are, None as "-", anything else as compact JSON.

    An audit may show what JSON could not store (it is written for people), so
    other objects appear as their ``repr``.
    """
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return value.isoformat()
    return json.dumps(value, ensure_ascii=False, default=repr)


def render_table(headers: list[str], rows: list[list[Any]], limit: int | None = None) -> list[str]:
    """A GitHub-flavoured table, every cell escaped (and cut to ``limit`` characters)."""
    out = ["| " + " | ".join(escape_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(escape_cell(show_value(cell), limit) for cell in row) + " |" for row in rows]
    return out
