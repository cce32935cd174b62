"""Who is who across channels: the config's ``people:`` list.

N-of-M counts people, not accounts: ``{name: alice, local: alice, slack:
U0AAA, github: alice}`` makes alice's Slack click and her GitHub comment one
vote. An account nobody lists is its own person.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["People", "PersonEntry"]


class PersonEntry(Protocol):
    """What a ``people:`` entry offers (``bot.config_blocks.PersonConfig``)."""

    @property
    def name(self) -> str: ...

    def accounts(self) -> list[str]: ...


class People:
    """Maps channel-qualified accounts ("slack:U0AAA") to person names, case-insensitively."""

    def __init__(self, entries: Iterable[tuple[str, Iterable[str]]] = ()) -> None:
        self._owner: dict[str, str] = {}
        for name, accounts in entries:
            for account in accounts:
                self._owner[account.casefold()] = name

    @classmethod
    def from_config(cls, people: Iterable[PersonEntry]) -> People:
        """From ``BotConfig.people``."""
        return cls((p.name, p.accounts()) for p in people)

    def person_of(self, account: str) -> str | None:
        """The person behind ``account``, or None when no entry names it."""
        return self._owner.get(account.casefold())
