"""Who is in a Slack user group, or in a channel? ``SlackDirectory``, cached briefly.

The bot checks a voter against ``reviewers.slack_groups`` on every vote,
and, for a loop with no ``reviewers`` block, against the members of the
channel the review was posted to; asking Slack each time would hit
``usergroups.users.list``'s and ``conversations.members``' rate limits.
Members are cached for ``ttl`` seconds (so someone who left a channel or a
group can answer for at most that long); a user missing from the cached set
(someone just added) triggers a refresh, at most one per ``refresh_gap``
seconds per group or channel, so a stream of votes from outsiders cannot
hammer the API. The clock is injectable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from adapters.channel import ChannelError

__all__ = ["SlackDirectory", "DirectoryApi"]

log = logging.getLogger(__name__)


class DirectoryApi(Protocol):
    """The calls the directory makes (``SlackClient`` implements them)."""

    def usergroup_members(self, usergroup: str) -> list[str]: ...

    def channel_members(self, channel: str) -> list[str]: ...


class SlackDirectory:
    def __init__(self, client: DirectoryApi, *, ttl: float = 60.0, refresh_gap: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl = ttl
        self.refresh_gap = refresh_gap
        self.clock = clock
        self._cache: dict[tuple[str, str], tuple[frozenset[str], float]] = {}
        self._lock = threading.Lock()

    def _fetch(self, key: tuple[str, str], fetch: Callable[[str], Iterable[str]],
               stale: tuple[frozenset[str], float] | None) -> frozenset[str]:
        kind, name = key
        try:
            members = frozenset(fetch(name))
        except ChannelError as exc:
            if stale is None or exc.permanent:
                raise
            log.warning("cannot refresh the members of Slack %s %s (%s); using those fetched earlier", kind, name,
                        exc)
            return stale[0]
        self._cache[key] = (members, self.clock())
        return members

    def _members(self, key: tuple[str, str], fetch: Callable[[str], Iterable[str]],
                 expecting: str | None) -> frozenset[str]:
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                return self._fetch(key, fetch, None)
            members, fetched_at = cached
            age = self.clock() - fetched_at
            if age >= self.ttl or (expecting is not None and expecting not in members and age >= self.refresh_gap):
                return self._fetch(key, fetch, cached)
            return members

    def group_members(self, group_id: str, *, expecting: str | None = None) -> frozenset[str]:
        """The group's user ids; ``expecting`` a user not in the cached set refreshes it (rate-limited)."""
        return self._members(("user group", group_id), self.client.usergroup_members, expecting)

    def channel_members(self, channel: str, *, expecting: str | None = None) -> frozenset[str]:
        """The channel's user ids (every page of ``conversations.members``), cached like a group's."""
        return self._members(("channel", channel), self.client.channel_members, expecting)

    def is_member(self, group_id: str, user_id: str) -> bool:
        return user_id in self.group_members(group_id, expecting=user_id)

    def in_channel(self, channel: str, user_id: str) -> bool:
        return user_id in self.channel_members(channel, expecting=user_id)
