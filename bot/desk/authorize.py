"""May this account vote on this review? Per channel, behind one narrow interface.

The pure rules (``bot.review_voters.authorize``) know the id lists of each
channel; what needs a channel's API - Slack user groups, GitHub teams and
permissions - comes in as a ``Membership`` the channel's wiring provides.
``people:`` entries named by ``reviewers.people`` admit every account of
that person, on any channel.

``where`` also carries ``review_posts``, the message data of each post of
the review on the voter's channel, so that checks run against the review's
own places, never the one an answer came from; a ``PlaceCheck`` membership
(GitHub's) refuses answers given anywhere but there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from adapters.channel import ChannelError
from bot.review_voters import authorize, is_listed
from bot.review_records import Reviewers

from .people import People

__all__ = ["Authorizer", "ListMembership", "Membership", "PlaceCheck"]


class Membership(Protocol):
    """One channel's check: None when ``account`` (the id within the channel) may vote, else why not.

    ``where`` says where the answer was given (``{"repository": "octo/ops",
    "issue": 42}``), for checks that depend on it, such as a GitHub
    permission. ``always_checks``: the channel checks even when the loop
    names no reviewers at all - GitHub: anyone can comment on a public issue,
    so it asks for the configured permission on the review's repository;
    Slack: only members of the channel the review was posted to may answer.
    """

    always_checks: bool

    def refusal(self, reviewers: Reviewers, account: str, where: Mapping[str, Any]) -> str | None: ...


@runtime_checkable
class PlaceCheck(Protocol):
    """A membership that also says where answers count at all (GitHub: only on the review's own issue)."""

    def place_refusal(self, where: Mapping[str, Any]) -> str | None:
        """Why an answer given at ``where`` is no answer to this review at all, else None.

        Asked before anything else, for every voter - even one a ``people:``
        entry names.
        """
        ...


class ListMembership:
    """The id lists of ``reviewers`` for ``channel``, plus an optional API-backed check (groups, teams)."""

    always_checks = False

    def __init__(self, channel: str, is_member: Callable[[Reviewers, str], bool] | None = None) -> None:
        self.channel = channel
        self._is_member = is_member

    def refusal(self, reviewers: Reviewers, account: str, where: Mapping[str, Any] | None = None) -> str | None:
        check = self._is_member
        member = None if check is None else (lambda _voter: check(reviewers, account))
        return authorize(reviewers, f"{self.channel}:{account}", member)


class Authorizer:
    """Who may vote, across channels: ``refusal(reviewers, "slack:U0AAA")``."""

    def __init__(self, memberships: Mapping[str, Membership], people: People | None = None) -> None:
        self._memberships = dict(memberships)
        self._people = people or People()

    def refusal(self, reviewers: Reviewers, voter: str, where: Mapping[str, Any] | None = None) -> str | None:
        channel, sep, account = voter.partition(":")
        if not sep or not channel or not account:
            return f"voter {voter!r} is not a channel-qualified id like local:alice or slack:U0AAA"
        membership = self._memberships.get(channel)
        if isinstance(membership, PlaceCheck) and where is not None:
            misplaced = membership.place_refusal(where)
            if misplaced is not None:
                return misplaced
        if reviewers.anyone and not (membership is not None and membership.always_checks):
            return None
        person = self._people.person_of(voter)
        if person is not None and is_listed(reviewers.people, person):
            return None
        if membership is None:
            return f"votes from channel {channel!r} are not accepted by this bot (it is not configured)"
        try:
            reason = membership.refusal(reviewers, account, where or {})
        except ChannelError as err:  # the channel's API could not say (down, rate-limited): refuse, saying so
            return f"could not check {channel} membership right now ({err}); try again in a minute"
        if reason is not None and reviewers.people:
            reason += f"; people who may answer: {', '.join(reviewers.people)}"
        return reason
