"""Who is who on GitHub? Repository permissions and team membership, cached briefly.

The bot's authorisation asks these for every vote (``github_min_permission``,
``github_teams``); a short cache (60 s by default, injectable clock) keeps a
burst of votes or a redelivery from costing one API call each. Failures are
not cached: they raise ``ChannelError`` and the next question asks again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["PERMISSION_LEVELS", "Directory", "DirectoryAPI", "permission_at_least"]

#: Repository roles from least to most.
PERMISSION_LEVELS = ("none", "read", "triage", "write", "maintain", "admin")


def permission_at_least(permission: str, minimum: str) -> bool:
    """``permission_at_least("maintain", "write")`` is True; an unknown role counts as none."""
    rank = {name: index for index, name in enumerate(PERMISSION_LEVELS)}
    if minimum not in rank:
        raise ValueError(f"unknown permission {minimum!r}; one of {', '.join(PERMISSION_LEVELS)}")
    return rank.get(permission, 0) >= rank[minimum]


class DirectoryAPI(Protocol):
    def collaborator_permission(self, repository: str, login: str) -> str: ...
    def team_member(self, org: str, team_slug: str, login: str) -> bool: ...


class Directory:
    """``permission(repo, login)`` and ``in_team("org/team", login)``, each answer kept ``ttl`` seconds."""

    def __init__(self, api: DirectoryAPI, *, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._permissions: dict[tuple[str, str], tuple[float, str]] = {}
        self._teams: dict[tuple[str, str], tuple[float, bool]] = {}

    def permission(self, repository: str, login: str) -> str:
        """admin / maintain / write / triage / read / none."""
        key = (repository.lower(), login.lower())
        now = self._clock()
        with self._lock:
            cached = self._permissions.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        value = self.api.collaborator_permission(repository, login)
        with self._lock:
            self._permissions[key] = (now, value)
        return value

    def in_team(self, team: str, login: str) -> bool:
        """Is ``login`` an active member of ``team`` ("org/team-slug")?"""
        org, sep, slug = team.partition("/")
        if not sep or not org or not slug:
            raise ValueError(f'a GitHub team is "org/team-slug", got {team!r}')
        key = (team.lower(), login.lower())
        now = self._clock()
        with self._lock:
            cached = self._teams.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        value = self.api.team_member(org, slug, login)
        with self._lock:
            self._teams[key] = (now, value)
        return value
