"""Who may vote on a review? The pure check of a voter against the loop's reviewer lists.

Kept apart from the vote rules because it is asked on its own: by ``status``
and ``loopbot runs`` (who could answer this?) and by the desk, which adds its
channels' memberships and ``people:`` around it. Like the rest of the review
rules it reads nothing and calls no API itself: a group or team membership
is asked through the ``MembershipCheck`` it is given.
"""

from __future__ import annotations

from collections.abc import Callable

from .review_records import MembershipCheck, Reviewers

__all__ = ["Authorize", "authorize", "is_listed"]

#: Says why ``voter`` may not vote under ``reviewers`` (None: may vote); ``authorize`` is the default.
Authorize = Callable[[Reviewers, str], "str | None"]


def is_listed(listed: list[str] | None, name: str) -> bool:
    """Whether ``listed`` names ``name``, ignoring case.

    Asked on every vote, against lists of a thousand names and more: an exact
    match (an id as the channel sends it, as the config usually spells it) is
    one C-level scan, and only a name in another case folds the list, up to
    its first match - never a set of every name folded per vote.
    """
    if not listed:
        return False
    if name in listed:
        return True
    key = name.casefold()
    return any(entry.casefold() == key for entry in listed)


def authorize(reviewers: Reviewers, voter: str, is_member: MembershipCheck | None = None) -> str | None:
    """None when ``voter`` may vote, else the reason it may not (said to the voter)."""
    channel, sep, name = voter.partition(":")
    if not sep or not channel or not name:
        return f"voter {voter!r} is not a channel-qualified id like local:alice or slack:U0AAA"
    if reviewers.anyone:
        return None
    if channel == "local":
        if is_listed(reviewers.local, name):
            return None
        if reviewers.local == []:
            return "review.reviewers.local is empty, so nobody may vote locally; add names to it (e.g. local: [alice])"
        named = ", ".join(reviewers.local or []) or "nobody"
        return f"{name} is not a reviewer of this loop for local votes (review.reviewers.local: {named})"
    if channel == "slack":
        if is_listed(reviewers.slack_users, name):
            return None
        if reviewers.slack_groups and is_member is not None and is_member(voter):
            return None
        who = [f"<@{user}>" for user in reviewers.slack_users or []]
        who += [f"<!subteam^{group}>" for group in reviewers.slack_groups or []]
        may = f"; who may answer: {', '.join(who)}" if who else ""
        return (f"<@{name}> is not one of this loop's Slack reviewers "
                f"(review.reviewers.slack_users / slack_groups){may}")
    if channel == "github":
        if is_listed(reviewers.github_users, name):
            return None
        if (reviewers.github_teams or reviewers.github_min_permission) and is_member is not None and is_member(voter):
            return None
        return (
            f"@{name} is not one of this loop's GitHub reviewers "
            "(review.reviewers.github_users / github_teams / github_min_permission)"
        )
    return f"votes from channel {channel!r} are not accepted for this loop"
