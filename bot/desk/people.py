"""Who is who across channels: the config's ``people:`` list.

N-of-M counts people, not accounts: ``{name: alice, local: alice, slack:
U0AAA, github: alice}`` makes alice's Slack click and her GitHub comment one
vote. An account nobody lists is its own person.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["People"]


class People:
    """Maps channel-qualified accounts ("slack:U0AAA") to person names, case-insensitively."""

    def __init__(self, entries: Iterable[tuple[str, Iterable[str]]] = ()) -> None:
        self._owner: dict[str, str] = {}
        for name, accounts in entries:
            for account in accounts:
                self._owner[account.casefold()] = name

    @classmethod
    def from_config(cls, people: Iterable[object]) -> People:
        """From ``BotConfig.people`` (objects with ``name`` and ``accounts()``)."""
        return cls((p.name, p.accounts()) for p in people)  # type: ignore[attr-defined]

    def person_of(self, account: str) -> str | None:
        """The person behind ``account``, or None when no entry names it."""
        return self._owner.get(account.casefold())

    def accounts_of(self, person: str) -> list[str]:
        key = person.casefold()
        return [account for account, name in self._owner.items() if name.casefold() == key]
