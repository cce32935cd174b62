"""What a loop proposes, as data: the one line approving does, and the sections that show it.

As free text in a review's reason, a table would be flattened into one
cell and channels could only cut it. A
``Proposal`` keeps the structure - markdown ``Text``, a ``Table`` of
plain-text cells, a ``ChangeList`` of one-line items, a ``Link`` - so each
channel can lay it out (and split it) its own way, and the local file can
show it whole.

Every class is frozen and checked on construction: a mistake in a loop's
code fails where the loop builds the proposal, with the field named, not
later in a renderer. Lists given for the sequence fields are kept as
tuples (hashable, and never changed behind the check), so two equal
proposals compare equal after a JSON round trip
(``to_dict``/``proposal_from_dict``); ``rendered_lines`` gives the markdown
``ReviewRequest.to_markdown`` appends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .markdown import escape_cell, escape_inline

__all__ = ["ChangeList", "Link", "Proposal", "ProposalSection", "Table", "Text", "proposal_from_dict"]

#: A link a reader may open: an absolute http(s) URL with no spaces or characters that end a markdown link.
_URL = re.compile(r"\Ahttps?://[^\s()<>\[\]]+\Z")


def _text(value: Any, where: str, *, one_line: bool = False, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected a str, got {type(value).__name__}")
    if one_line and ("\n" in value or "\r" in value):
        raise ValueError(f"{where}: must be one line, got {value[:80]!r}")
    if not empty and not value.strip():
        raise ValueError(f"{where}: must not be empty")
    return value


def _texts(value: Any, where: str, *, one_line: bool = False) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{where}: expected a list of str, got {type(value).__name__}")
    return tuple(_text(item, f"{where}[{n}]", one_line=one_line) for n, item in enumerate(value))


def _keep(obj: object, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # frozen: __post_init__ stores the checked, tuple form


@dataclass(frozen=True)
class Text:
    """A paragraph or more of markdown (HTML in it is shown as text, never rendered)."""

    markdown: str
    title: str = ""

    def __post_init__(self) -> None:
        _text(self.markdown, "Text.markdown", empty=False)
        _text(self.title, "Text.title", one_line=True)


@dataclass(frozen=True)
class Table:
    """Columns and rows of plain-text cells; every row has one cell per column."""

    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    title: str = ""

    def __post_init__(self) -> None:
        columns = _texts(self.columns, "Table.columns", one_line=True)
        if not columns:
            raise ValueError("Table.columns: a table needs at least one column")
        if isinstance(self.rows, str) or not isinstance(self.rows, Sequence):
            raise TypeError(f"Table.rows: expected a list of rows, got {type(self.rows).__name__}")
        rows = tuple(_texts(row, f"Table.rows[{n}]") for n, row in enumerate(self.rows))
        for n, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(f"Table.rows[{n}]: {len(row)} cell(s) for {len(columns)} column(s) {list(columns)}")
        _keep(self, "columns", columns)
        _keep(self, "rows", rows)
        _text(self.title, "Table.title", one_line=True)


@dataclass(frozen=True)
class ChangeList:
    """What approving changes, one line per item ("#12: add P1")."""

    items: Sequence[str]
    title: str = ""

    def __post_init__(self) -> None:
        items = _texts(self.items, "ChangeList.items", one_line=True)
        if not items:
            raise ValueError("ChangeList.items: a list needs at least one item")
        _keep(self, "items", items)
        _text(self.title, "ChangeList.title", one_line=True)


@dataclass(frozen=True)
class Link:
    """A page the reader may open (an absolute http or https URL) and the words shown for it."""

    url: str
    text: str = ""
    title: str = ""

    def __post_init__(self) -> None:
        _text(self.url, "Link.url")
        if not _URL.match(self.url):
            raise ValueError(f"Link.url: expected an absolute http(s) URL without spaces, got {self.url[:200]!r}")
        _text(self.text, "Link.text", one_line=True)
        _text(self.title, "Link.title", one_line=True)


ProposalSection = Text | Table | ChangeList | Link
_KINDS: dict[str, type[ProposalSection]] = {"text": Text, "table": Table, "list": ChangeList, "link": Link}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}


@dataclass(frozen=True)
class Proposal:
    """What approving does, in one line ("Approve to apply 91 label changes to octo/ops"), then its sections."""

    summary: str
    sections: Sequence[ProposalSection] = ()

    def __post_init__(self) -> None:
        _text(self.summary, "Proposal.summary", one_line=True, empty=False)
        if isinstance(self.sections, str) or not isinstance(self.sections, Sequence):
            raise TypeError(f"Proposal.sections: expected a list of sections, got {type(self.sections).__name__}")
        for n, section in enumerate(self.sections):
            if type(section) not in _KIND_OF:
                raise TypeError(f"Proposal.sections[{n}]: expected Text, Table, ChangeList or Link, "
                                f"got {type(section).__name__}")
        _keep(self, "sections", tuple(self.sections))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: each section an object with its ``kind`` (text, table, list, link)."""
        return {"summary": self.summary, "sections": [_section_dict(s) for s in self.sections]}

    def rendered_lines(self) -> list[str]:
        """The proposal as markdown lines: a ``## Proposal`` heading, the summary, each section.

        Loop text is escaped: a cell's ``|`` or line break cannot break its
        table, and no HTML (a fake review marker) is ever rendered.
        """
        return ["## Proposal", "", f"**{escape_inline(self.summary)}**", *self.section_lines()]

    def section_lines(self) -> list[str]:
        """Just the sections, each after a blank line (and its ``###`` title): for channels that show the summary."""
        lines: list[str] = []
        for section in self.sections:
            lines.append("")
            if section.title:
                lines += [f"### {escape_inline(section.title)}", ""]
            lines += _section_lines(section)
        return lines


def _section_dict(section: ProposalSection) -> dict[str, Any]:
    data: dict[str, Any] = {"kind": _KIND_OF[type(section)], "title": section.title}
    if isinstance(section, Text):
        data["markdown"] = section.markdown
    elif isinstance(section, Table):
        data["columns"] = list(section.columns)
        data["rows"] = [list(row) for row in section.rows]
    elif isinstance(section, ChangeList):
        data["items"] = list(section.items)
    else:
        data["url"], data["text"] = section.url, section.text
    return data


def _section_lines(section: ProposalSection) -> list[str]:
    if isinstance(section, Text):
        return _markdown_lines(section.markdown)
    if isinstance(section, Table):
        head = "| " + " | ".join(escape_cell(c) for c in section.columns) + " |"
        rule = "|" + "---|" * len(section.columns)
        return [head, rule, *("| " + " | ".join(escape_cell(c) for c in row) + " |" for row in section.rows)]
    if isinstance(section, ChangeList):
        return [f"- {escape_inline(item)}" for item in section.items]
    words = section.text or section.url
    shown = escape_inline(words).replace("[", "\\[").replace("]", "\\]")
    return [f"[{shown}]({section.url})"]


def _markdown_lines(markdown: str) -> list[str]:
    """A loop's markdown kept inside its section: no HTML, no headings of its own, no code fence left open.

    A heading would sit beside the request's own; an open fence would turn
    everything after the proposal (how to answer) into code.
    """
    safe = markdown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    lines = [re.sub(r"\A(\s*)#", r"\1\\#", line) for line in safe.strip("\n").splitlines()]
    fences = sum(1 for line in lines if line.lstrip().startswith(("```", "~~~")))
    return lines + ["```"] if fences % 2 else lines


def proposal_from_dict(data: Any, where: str = "proposal") -> Proposal:
    """A ``Proposal`` from ``Proposal.to_dict`` data; ``ValueError`` naming the place of anything wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    sections = data.get("sections", [])
    if not isinstance(sections, list):
        raise ValueError(f"{where}.sections: expected a list, got {type(sections).__name__}")
    parsed = tuple(_section_from(s, f"{where}.sections[{n}]") for n, s in enumerate(sections))
    try:
        return Proposal(summary=data.get("summary"), sections=parsed)  # type: ignore[arg-type]  # checked there
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None


def _section_from(data: Any, where: str) -> ProposalSection:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = _KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"{where}.kind: expected one of {', '.join(_KINDS)}, got {kind!r}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        return cls(**fields)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{where}: {err}") from None
