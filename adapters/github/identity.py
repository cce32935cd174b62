"""Who is loopbot on GitHub? Known before it posts, so that it never mistakes another's comment for its own.

Review ids are predictable, so anyone can post ``<!-- loopbot:review=ID -->``
first; the channel adopts a marked comment only when loopbot wrote it, and
event parsing never counts loopbot's own comments as votes. Both need loopbot's
login: a token's user (``GET /user``), or a GitHub App's bot user
``<slug>[bot]`` (``GET /app`` with the App's JWT), whose comments also carry
``performed_via_github_app`` with the App's id.

``BotIdentity`` learns it on first need and again after every failure: the
channel calls ``require()`` before each post, which raises a retryable
``ChannelError`` while the identity is unknown - the outbox tries again later,
and nothing is posted meanwhile. Event parsing reads ``is_self`` without asking
GitHub: while the identity is unknown, event parsing relies on loopbot's comments all
starting with a ``<!-- loopbot:`` marker (``events``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..channel import ChannelError

__all__ = ["BotIdentity", "Me"]


@dataclass(frozen=True)
class Me:
    """loopbot's login, and its App's id when it is a GitHub App (None for a token)."""

    login: str
    app_id: int | None = None


class BotIdentity:
    """loopbot's GitHub identity: fixed (``BotIdentity.of("me")``), or learned by ``learn`` until it is known."""

    def __init__(self, learn: Callable[[], Me] | None = None, *, me: Me | None = None) -> None:
        self._learn = learn
        self._me = me
        self._lock = threading.Lock()

    @classmethod
    def of(cls, value: BotIdentity | str | None) -> BotIdentity:
        """An identity from what callers pass: one already made, a known login, or None (unknown, never learned)."""
        if isinstance(value, BotIdentity):
            return value
        return cls(me=Me(value) if value else None)

    @property
    def me(self) -> Me | None:
        return self._me

    @property
    def login(self) -> str | None:
        return self._me.login if self._me is not None else None

    def require(self) -> Me:
        """Who we are, learning it now if need be; a retryable ChannelError while it cannot be learned."""
        with self._lock:
            if self._me is None:
                if self._learn is None:
                    raise ChannelError("loopbot does not know its own GitHub login, so it posts nothing")
                try:
                    self._me = self._learn()
                except ChannelError as err:
                    raise ChannelError(f"loopbot does not know its own GitHub login yet ({err}); "
                                       "it posts nothing until it does", retry_after=err.retry_after) from err
            return self._me

    def is_self(self, user: Mapping[str, Any] | None, via_app: Any = None) -> bool:
        """Was this written by loopbot: its login, or (an App) ``performed_via_github_app`` naming its App."""
        me = self._me
        if me is None:
            return False
        if me.app_id is not None and isinstance(via_app, Mapping) and via_app.get("id") == me.app_id:
            return True
        login = user.get("login") if isinstance(user, Mapping) else None
        return isinstance(login, str) and login.casefold() == me.login.casefold()
