"""adapters: the channels between loop_engine's reviews and the people who answer them.

Depends on loop_engine only (never on bot). Slack and GitHub channels live in
their own modules and are imported where configured, so their SDKs load only
when used.
"""

from .channel import Channel, ChannelError, MessageRef, ReviewPost
from .commands import Command, CommandError, decision_from_word, parse_command, parse_comment
from .local import LocalChannel

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
