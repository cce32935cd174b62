"""adapters: the channels between loop_engine's reviews and the people who answer them.

Depends on loop_engine only (never on bot). Slack and GitHub channels live in
their own modules and are imported where configured, so their SDKs load only
when used.
"""

from typing import TYPE_CHECKING

from .lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover - what type checkers and editors see
    from .channel import Channel, ChannelError, MessageRef, ReviewPost
    from .command_error import CommandError
    from .commands import Command, decision_from_word, parse_command, parse_comment
    from .local import LocalChannel

#: public name -> the submodule that defines it; loaded on first use (PEP 562), so that importing
#: one light module (adapters.durations, adapters.suggest) does not load every channel and the engine
_WHERE = {
    **dict.fromkeys(("Channel", "ChannelError", "MessageRef", "ReviewPost"), "channel"),
    **dict.fromkeys(("Command", "decision_from_word", "parse_command", "parse_comment"), "commands"),
    "CommandError": "command_error",
    "LocalChannel": "local",
}

__all__ = [
    "Channel",
    "ChannelError",
    "MessageRef",
    "ReviewPost",
    "LocalChannel",
    "Command",
    "CommandError",
    "decision_from_word",
    "parse_command",
    "parse_comment",
]


__getattr__ = lazy_getattr(__name__, _WHERE)
