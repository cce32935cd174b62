"""Which channels this bot has: the local one always, Slack and GitHub when configured and built."""

from __future__ import annotations

from pathlib import Path

from adapters.local import LocalChannel

__all__ = ["LOCAL_REVIEWS_DIR", "local_channel"]

#: Where the local channel writes ``<review id>.md`` under ``state_dir`` (the store keeps its own JSON apart).
LOCAL_REVIEWS_DIR = "local-reviews"


def local_channel(state_dir: Path, decide_command: str = "loopbot decide") -> LocalChannel:
    """The always-on channel of a bot on ``state_dir``; serve and `run` must agree on its folder."""
    return LocalChannel(Path(state_dir) / LOCAL_REVIEWS_DIR, decide_command=decide_command)
