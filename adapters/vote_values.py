"""What may a vote carry? The limits on its values and on its voter's name.

A vote's text and changes are stored in the review and then in every later
snapshot of its run, and a voter's name is echoed in replies, ``status`` and
the log. So a value that could not be stored and read back as it is, or a
name that could forge output, is refused when the vote is cast, naming the
key: accepted, it would break the review or the run long after the person who
sent it has gone.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "MAX_VALUE_DEPTH",
    "MAX_VALUE_BYTES",
    "MAX_IDENTITY_LENGTH",
    "TOO_DEEP",
    "value_problem",
    "identity_problem",
    "not_utf8",
    "shorten",
]

#: A vote's changes are stored in the review, then in the run's snapshots, a few
#: levels further down: orjson refuses more than 255 levels and the stdlib
#: decoder runs out of stack near 1,000, so the limit sits far below both.
MAX_VALUE_DEPTH = 32
#: Changes are stored in every snapshot of the run from then on.
MAX_VALUE_BYTES = 64 * 1024
#: Voter names are printed in replies, status and logs.
MAX_IDENTITY_LENGTH = 100
#: The end of the message for a value nested deeper than ``MAX_VALUE_DEPTH``.
TOO_DEEP = f"nested more than {MAX_VALUE_DEPTH} levels deep; store a flatter value"
#: Integers a JSON reader keeps exact (the engine's own rule, loop_engine.jsonvalue).
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
#: Characters that would let a name forge lines or reorder text in output and logs:
#: C0 and C1 controls (newlines included), DEL, Unicode line/paragraph separators
#: and bidirectional overrides.
_CONTROL_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters, for quoting what someone sent back to them."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def not_utf8(text: str) -> bool:
    """A lone surrogate (from argv or a file that is not UTF-8) cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def value_problem(value: Any, where: str = "", *, depth: int = 0) -> str | None:
    """Why ``value`` would not come back from the store as it went in, else None.

    ``where`` is the dotted key that holds ``value`` ("" for a vote's whole
    changes) and ``depth`` how deep that key already sits; messages name the
    key where the problem is.

    The engine refuses such a value only when the run resumes, and a stored
    review too deep to decode breaks every tick; so votes are checked when
    cast. Walks without recursion and stops once ``MAX_VALUE_BYTES`` worth
    of the value has been seen, so neither deep nesting nor a YAML alias
    bomb (shared lists, expanded on every visit) can make the check itself
    expensive. ``depth`` is how deep ``value`` already sits.
    """
    budget = MAX_VALUE_BYTES
    too_big = f"{where or 'the changes'}: larger than {MAX_VALUE_BYTES // 1024} KiB; store a smaller value"
    stack: list[tuple[Any, int, str]] = [(value, depth, where)]
    while stack:
        item, level, path = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if level >= MAX_VALUE_DEPTH:
                return f"{shorten(path.split('[', 1)[0] or 'the changes')}: {TOO_DEEP}"
            budget -= 2
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return f"{shorten(path or 'the changes')}: key {key!r} is not text; JSON keys are text"
                    budget -= len(key) + 4
                    if budget < 0:
                        return too_big
                    if not_utf8(key):
                        return f"{shorten(path or 'the changes')}: a key is not valid UTF-8 text"
                    stack.append((child, level + 1, f"{path}.{key}" if path else key))
            else:
                for index, child in enumerate(item):
                    budget -= 1
                    if budget < 0:
                        return too_big
                    stack.append((child, level + 1, f"{path}[{index}]"))
        elif kind is str:
            budget -= len(item) + 2
            if budget < 0:
                return too_big
            if not_utf8(item):
                return f"{shorten(path)}: not valid UTF-8 text (check the terminal's or the file's encoding)"
        elif item is None or kind is bool:
            budget -= 5
        elif kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return f"{shorten(path)}: the integer does not fit in 64 bits; quote it to store it as text"
            budget -= 20
        elif kind is float:
            if not math.isfinite(item):
                return (f"{shorten(path)}: {item!r} is not a finite number and JSON cannot hold it; "
                        "store it as quoted text, or null")
            budget -= 24
        else:
            return (f"{shorten(path)}: a {kind.__name__} is not a JSON value; use text, numbers, "
                    "true/false, null, lists and mappings (quote dates and times)")
        if budget < 0:
            return too_big
    return None


def identity_problem(name: str) -> str | None:
    """Why ``name`` cannot be a voter's name, else None.

    Names are echoed in replies, ``status`` and the log: a newline, a
    terminal escape or a bidi override in one could forge lines there, and
    leading or trailing spaces make a name that looks like another.
    """
    if not name or not name.strip():
        return "a voter name cannot be empty"
    if len(name) > MAX_IDENTITY_LENGTH:
        return f"a voter name has at most {MAX_IDENTITY_LENGTH} characters, not {len(name):,}"
    if not_utf8(name):
        return "a voter name must be valid UTF-8 text (check the terminal's encoding)"
    control = _CONTROL_CHARS.search(name)
    if control is not None:
        return (f"a voter name cannot hold control characters or line breaks "
                f"({control.group()!r} at position {control.start() + 1})")
    if name != name.strip():
        return "a voter name cannot start or end with a space"
    return None
