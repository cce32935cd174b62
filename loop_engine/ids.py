"""Run, record and checkpoint ids: how they are made and which are safe.

Every module that names a run or a file after one imports this, and this
imports nothing of the engine, so data types, persistence and the
checkpoint can all use it without importing each other.
"""

from __future__ import annotations

import uuid
from datetime import datetime

__all__ = ["new_id", "new_trace_id", "validate_trace_id"]

#: The longest id, in UTF-8 bytes, leaving room in a file name for what is added around it.
_MAX_TRACE_ID = 128


def new_id() -> str:
    """A short random id; 12 hex digits keep collisions out of any one run."""
    return uuid.uuid4().hex[:12]


def new_trace_id(now: datetime | None = None) -> str:
    """A readable, sortable, unique run id: time for people, a uuid part for uniqueness."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return f"run-{stamp}-{new_id()}"


def validate_trace_id(trace_id: object, what: str = "trace id") -> str:
    """Refuse ids that could escape a directory or make odd file names (also used for checkpoint ids)."""
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError(f"{what} must be a non-empty string, got {trace_id!r}")
    size = len(trace_id.encode("utf-8", "surrogatepass"))  # file names are limited in bytes, not characters
    if size > _MAX_TRACE_ID:
        raise ValueError(
            f"{what} is {len(trace_id)} characters ({size} bytes in UTF-8); at most {_MAX_TRACE_ID} bytes are allowed"
        )
    if "/" in trace_id or "\\" in trace_id or ".." in trace_id or trace_id.startswith("."):
        raise ValueError(
            f"{what} {trace_id!r} contains a path separator, '..' or a leading '.'; "
            "use letters, digits, '-', '_' and single dots"
        )
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in trace_id):
        raise ValueError(f"{what} {trace_id!r} contains control characters")
    return trace_id
