"""Which texts a text-reading gate looks at: ``context.output`` and ``context.files``.

Syntax and security gates both read "the output under test"; this module is
the one place that decides what that is, so both treat odd input (bytes,
non-text output, a files mapping that is not a mapping) the same way:
as a problem to report, never as an exception.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .base import GateContext

__all__ = ["OUTPUT_LABEL", "Source", "Sources", "collect_sources"]

#: How the step's output is named where a file path would be.
OUTPUT_LABEL = "<output>"


@dataclass(frozen=True)
class Source:
    """One text to check; ``label`` is a file path or ``OUTPUT_LABEL``."""

    label: str
    text: str


@dataclass
class Sources:
    """The texts found plus the reasons some input could not be read as text."""

    texts: list[Source] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _as_text(label: str, value: Any, problems: list[str]) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})")
            return None
    problems.append(f"{label}: expected text (str), got {type(value).__name__}")
    return None


def collect_sources(context: GateContext, extensions: Iterable[str] | None = None) -> Sources:
    """The output (if any) first, then the files whose names end in ``extensions``, by path.

    ``extensions=None`` takes every file. Sorting by path keeps results
    identical however the caller built the mapping.
    """
    found = Sources()
    if context.output is not None:
        text = _as_text(OUTPUT_LABEL, context.output, found.problems)
        if text is not None:
            found.texts.append(Source(OUTPUT_LABEL, text))
    files = context.files
    if files is None:
        return found
    if not isinstance(files, dict):
        found.problems.append(f"context.files: expected a dict of path -> text, got {type(files).__name__}")
        return found
    wanted = tuple(e.lower() for e in extensions) if extensions is not None else None
    for path in sorted(files, key=str):
        label = str(path)
        if wanted is not None and not label.lower().endswith(wanted):
            continue
        text = _as_text(label, files[path], found.problems)
        if text is not None:
            found.texts.append(Source(label, text))
    return found
