"""How a command is refused: one error type for every part of the grammar.

In a module of its own because the grammar (``adapters.commands``) and the
reader of a modify's changes (``adapters.modify_changes``) both raise it, and
the grammar uses that reader: neither may import the other for it.
"""

from __future__ import annotations

__all__ = ["CommandError"]


class CommandError(ValueError):
    """Text that was meant as a command but is not a valid one; the message is the reply."""
