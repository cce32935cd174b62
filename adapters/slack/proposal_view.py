"""How does a loop's ``Proposal`` read in Slack? mrkdwn pieces that each fit one text object, and files.

mrkdwn has no tables (protocols.md), so a ``Table`` becomes a compact
aligned block in a code fence when its rows are short and plain, else one
bulleted line per row ("• #12 · Crash on start · add P1") under a line
naming the columns. A ``ChangeList`` is a bulleted list, a ``Text`` the
loop's markdown in its mrkdwn look-alike (``to_mrkdwn``), a ``Link`` its
words and its real target. Every piece is inert loop text of at most
``MAX_TEXT`` characters and nothing is dropped: a long section goes on in
the next piece, and ``render`` spreads the pieces over the review message,
further thread replies, or - for a proposal too big for a few messages - a
file with the whole proposal as markdown and each table as CSV.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from loop_engine.proposal import ChangeList, Link, Proposal, ProposalSection, Table, Text

from .limits import MAX_TEXT, cut, split_text
from .mrkdwn import inert, to_mrkdwn

__all__ = ["SlackFile", "proposal_files", "proposal_pieces", "table_rows"]

#: The widest row (in characters) laid out as an aligned code block; wider tables are bulleted rows.
MAX_ALIGNED_WIDTH = 80
#: A section title's longest shown form.
MAX_TITLE = 500
_FENCE = "```"
_SEPARATOR = " · "


@dataclass(frozen=True)
class SlackFile:
    """A file uploaded to a review's thread (``files_upload_v2``): the whole proposal, a table as CSV."""

    filename: str
    title: str
    content: str


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _title(section: ProposalSection) -> str:
    """A section's title in bold, cut to ``MAX_TITLE`` (the file holds it whole)."""
    return f"*{cut(inert(_one_line(section.title)), MAX_TITLE)}*" if section.title else ""


def _aligned(table: Table) -> list[str] | None:
    """The table as padded lines (header, rule, rows), or None when it would not read well that way."""
    cells = [list(table.columns), *(list(row) for row in table.rows)]
    if any("`" in cell or "\n" in cell or "\r" in cell or "\t" in cell for row in cells for cell in row):
        return None
    widths = [max(len(row[n]) for row in cells) for n in range(len(table.columns))]
    if sum(widths) + 2 * (len(widths) - 1) > MAX_ALIGNED_WIDTH:
        return None

    def line(row: list[str]) -> str:
        return inert("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())

    rule = "  ".join("-" * width for width in widths)
    return [line(cells[0]), rule, *(line(row) for row in cells[1:])]


def table_rows(table: Table) -> list[str]:
    """One bulleted mrkdwn line per row, cells in column order (an empty cell shows as "–")."""
    return ["• " + _SEPARATOR.join(inert(_one_line(cell)) or "–" for cell in row) for row in table.rows]


def _table_pieces(table: Table) -> list[str]:
    title = _title(table)
    aligned = _aligned(table)
    if aligned is not None:
        head, rows = aligned[:2], aligned[2:] or [""]
        return _fenced(title, head, rows)
    columns = "_" + _SEPARATOR.join(inert(_one_line(c)) or "–" for c in table.columns) + "_"
    lines = [line for line in (title, columns) if line] + (table_rows(table) or ["_(no rows)_"])
    return split_text("\n".join(lines), MAX_TEXT)


def _fenced(title: str, head: list[str], rows: list[str]) -> list[str]:
    """Rows in code blocks of at most ``MAX_TEXT`` characters, each opening with the column header."""
    pieces: list[str] = []
    opening = "\n".join([*([title] if title else []), _FENCE + head[0], *head[1:]])
    current = opening
    for row in rows:
        if len(current) + 1 + len(row) + len(_FENCE) > MAX_TEXT:
            pieces.append(current + _FENCE)
            current = _FENCE + "\n".join(head)
        current += "\n" + row
    pieces.append(current + _FENCE)
    return pieces


def _link(link: Link) -> str:
    target = link.url.replace("|", "%7C")  # a "|" would give the link words of its own
    words = inert(_one_line(link.text))
    return f"{words} (<{target}>)" if words and words != link.url else f"<{target}>"


def _section_pieces(section: ProposalSection) -> list[str]:
    if isinstance(section, Table):
        return _table_pieces(section)
    title = _title(section)
    if isinstance(section, Text):
        body = to_mrkdwn(section.markdown.strip("\n"))
    elif isinstance(section, ChangeList):
        body = "\n".join(f"• {inert(item)}" for item in section.items)
    else:
        body = _link(section)
    return split_text("\n".join(line for line in (title, body) if line), MAX_TEXT)


def proposal_pieces(proposal: Proposal) -> list[str]:
    """The proposal's sections as mrkdwn texts of at most ``MAX_TEXT`` characters each, in order."""
    return [piece for section in proposal.sections for piece in _section_pieces(section)]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "review"


def _csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(table.rows)
    return out.getvalue()


def proposal_files(review_id: str, proposal: Proposal) -> list[SlackFile]:
    """The whole proposal as markdown, and each of its tables as CSV, named after the review."""
    slug = _slug(review_id)
    files = [SlackFile(f"{slug}-proposal.md", f"Review {review_id}: the whole proposal",
                       "\n".join(proposal.rendered_lines()) + "\n")]
    tables = [s for s in proposal.sections if isinstance(s, Table)]
    for n, table in enumerate(tables, 1):
        name = _slug(table.title) if table.title else f"table-{n}"
        files.append(SlackFile(f"{slug}-{name}.csv", f"Review {review_id}: {table.title or f'table {n}'} (CSV)",
                               _csv(table)))
    return files
