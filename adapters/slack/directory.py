"""Who is in a Slack user group? ``SlackDirectory.group_members``, cached briefly.

The bot checks a voter against ``reviewers.slack_groups`` on every vote;
asking Slack each time would hit ``usergroups.users.list``'s rate limit.
Members are cached for ``ttl`` seconds; a user missing from the cached set
(someone just added to the group) triggers a refresh, at most one per
``refresh_gap`` seconds per group, so a stream of votes from outsiders
cannot hammer the API. The clock is injectable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from adapters.channel import ChannelError

__all__ = ["SlackDirectory", "UsergroupApi"]

log = logging.getLogger(__name__)


class UsergroupApi(Protocol):
    """The one call the directory makes (``SlackClient`` implements it)."""

    def usergroup_members(self, usergroup: str) -> list[str]: ...


class SlackDirectory:
    def __init__(self, client: UsergroupApi, *, ttl: float = 60.0, refresh_gap: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.ttl = ttl
        self.refresh_gap = refresh_gap
        self.clock = clock
        self._cache: dict[str, tuple[frozenset[str], float]] = {}
        self._lock = threading.Lock()

    def _fetch(self, group_id: str, stale: tuple[frozenset[str], float] | None) -> frozenset[str]:
        try:
            members = frozenset(self.client.usergroup_members(group_id))
        except ChannelError as exc:
            if stale is None or exc.permanent:
                raise
            log.warning("cannot refresh Slack user group %s (%s); using the members fetched earlier", group_id, exc)
            return stale[0]
        self._cache[group_id] = (members, self.clock())
        return members

    def group_members(self, group_id: str, *, expecting: str | None = None) -> frozenset[str]:
        """The group's user ids; ``expecting`` a user not in the cached set refreshes it (rate-limited)."""
        with self._lock:
            cached = self._cache.get(group_id)
            if cached is None:
                return self._fetch(group_id, None)
            members, fetched_at = cached
            age = self.clock() - fetched_at
            if age >= self.ttl or (expecting is not None and expecting not in members and age >= self.refresh_gap):
                return self._fetch(group_id, cached)
            return members

    def is_member(self, group_id: str, user_id: str) -> bool:
        return user_id in self.group_members(group_id, expecting=user_id)
