"""What did a GitHub event say? Pure functions from a webhook delivery or a polled item to ``Reply``s.

Only two things are votes: a new issue comment with ``/verb`` lines
(``issue_comment`` / ``created``; edits and deletions are ignored) and one of
the labels ``loopbot:approve|reject|retry|pause`` added to an issue. Lines
inside fenced code, block quotes and HTML comments are never commands
(``adapters.commands.parse_comment``). Comments and labels by bots and by
loopbot itself are ignored - loopbot's own comments also by their shape, as
every one of them starts with a ``<!-- loopbot:`` marker, so they are never
votes even while loopbot does not know its login yet. Webhook and poller
build the same ``Reply`` (the same ``dedupe_key``) for the same comment or
label, so it counts once:

- a comment: ``github:comment:ID`` (GitHub's comment id, from the body);
- a label: ``github:label:OWNER/NAME#ISSUE:LABEL:LOGIN`` - the webhook's body
  holds no event id, so a label counts once per person and review.

``respond`` carries what binds the vote to what was written: the comment's
id, or the label's time (``label_at``: the issue's ``updated_at`` in a
webhook, the event's ``created_at`` when polled), which the bot compares with
the review's post, so an old comment or label (a replayed delivery) is no vote
on a review posted after it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loop_engine.checkpoint import HumanDecision

from ..channel import Identity, Reply
from ..command_error import CommandError
from ..commands import Command, parse_comment
from .identity import BotIdentity

__all__ = [
    "EVENTS",
    "VOTE_LABELS",
    "OWN_MARKER",
    "comment_key",
    "delivery_key",
    "label_key",
    "replies_from_comment",
    "replies_from_event",
    "reply_from_label",
]

#: The webhook events read for votes; any other event is acknowledged and ignored.
EVENTS = ("issue_comment", "issues")
#: Labels that are votes, and what each one votes.
VOTE_LABELS: dict[str, HumanDecision] = {
    "loopbot:approve": HumanDecision.APPROVE,
    "loopbot:reject": HumanDecision.REJECT,
    "loopbot:retry": HumanDecision.RETRY,
    "loopbot:pause": HumanDecision.PAUSE,
}
LABEL_REJECT_REASON = "rejected by label"


#: How every comment loopbot writes begins (review, answer, update, escalation).
OWN_MARKER = "<!-- loopbot:"


def comment_key(comment_id: int | str, index: int = 0) -> str:
    """``github:comment:ID``; a second command in one comment gets ``:2``, and so on."""
    return f"github:comment:{comment_id}" + (f":{index + 1}" if index else "")


def label_key(repository: str, issue: int, label: str, login: str) -> str:
    """``github:label:octo/ops#42:loopbot:approve:alice``: the same for the webhook and the poller."""
    return f"github:label:{repository.casefold()}#{issue}:{label.strip().lower()}:{login.casefold()}"


def delivery_key(replies: Sequence[Reply]) -> str:
    """What one delivery said, from its signed body: ``github:comment:ID``, or a label's key and time."""
    first = replies[0]
    if first.respond.get("comment_id") is not None:
        return comment_key(str(first.respond["comment_id"]))
    return str(first.respond["key"])


def _is_bot(user: Mapping[str, Any] | None, me: BotIdentity, via_app: Any = None) -> bool:
    if not isinstance(user, Mapping):
        return True  # no author: nobody to answer or authorise
    login = str(user.get("login") or "")
    if not login or user.get("type") == "Bot":
        return True
    return me.is_self(user, via_app)


def replies_from_comment(
    repository: str,
    issue: int,
    comment: Mapping[str, Any],
    *,
    bot_login: BotIdentity | str | None = None,
    via: str = "webhook",
) -> list[Reply]:
    """One Reply per command in a new comment (a comment as the webhook or the REST API shows it).

    An invalid command (or contradictory ones) is one Reply whose command is
    the ``CommandError``, so the bot answers with help instead of silence.
    ``bot_login``: loopbot's identity (or login), whose comments are not votes.
    """
    user = comment.get("user")
    if _is_bot(user, BotIdentity.of(bot_login), comment.get("performed_via_github_app")):
        return []
    assert isinstance(user, Mapping)
    login = str(user["login"])
    body = str(comment.get("body") or "")
    if "/" not in body or body.lstrip().startswith(OWN_MARKER):
        return []  # the common case, decided without parsing; or loopbot's own text, whoever it seems to be by
    try:
        commands: list[Command | CommandError] = list(parse_comment(body))
    except CommandError as exc:
        commands = [exc]
    comment_id = comment.get("id")
    context = {"repository": repository, "issue": issue}
    replies = []
    for index, command in enumerate(commands):
        key = comment_key(str(comment_id), index)
        respond = {
            **context,
            "comment_id": comment_id,
            "login": login,
            "quote": body[:500],
            "key": key,
            "created_at": comment.get("created_at"),
        }
        replies.append(Reply(Identity("github", login, login), command, context=context, dedupe_key=key,
                             via=f"github:{via}", respond=respond))
    return replies


def reply_from_label(
    repository: str,
    issue: int,
    label: str,
    sender: Mapping[str, Any] | None,
    labeled_at: Any,
    *,
    bot_login: BotIdentity | str | None = None,
    via: str = "webhook",
) -> Reply | None:
    """A vote label added by a person, else None.

    ``labeled_at`` is when GitHub says the label was added: the issue's
    ``updated_at`` in a webhook's body, the event's ``created_at`` when polled.
    """
    decision = VOTE_LABELS.get(label.strip().lower())
    if decision is None or _is_bot(sender, BotIdentity.of(bot_login)):
        return None
    assert isinstance(sender, Mapping)
    login = str(sender["login"])
    argument = LABEL_REJECT_REASON if decision is HumanDecision.REJECT else ""
    context = {"repository": repository, "issue": issue}
    key = label_key(repository, issue, label, login)
    at = labeled_at if isinstance(labeled_at, str) else None
    # the answer's marker names this one labelling, so a later one (on a later review) is answered too
    respond = {**context, "comment_id": None, "login": login, "quote": f"(added the label {label})",
               "key": f"{key}@{at or ''}", "label_at": at}
    return Reply(Identity("github", login, login), Command(decision, None, argument), context=context,
                 dedupe_key=key, via=f"github:{via}", respond=respond)


def replies_from_event(
    event: str, payload: Mapping[str, Any], *, bot_login: BotIdentity | str | None = None
) -> list[Reply]:
    """The votes in one webhook delivery (``X-GitHub-Event``, parsed body): only what the signed body says."""
    if event not in EVENTS:
        return []
    action = payload.get("action")
    repository = payload.get("repository")
    issue = payload.get("issue")
    if not isinstance(repository, Mapping) or not isinstance(issue, Mapping):
        return []
    full_name, number = repository.get("full_name"), issue.get("number")
    if not isinstance(full_name, str) or not isinstance(number, int):
        return []
    if event == "issue_comment" and action == "created":
        comment = payload.get("comment")
        if not isinstance(comment, Mapping):
            return []
        return replies_from_comment(full_name, number, comment, bot_login=bot_login)
    if event == "issues" and action == "labeled":
        label = payload.get("label")
        name = label.get("name") if isinstance(label, Mapping) else None
        if not isinstance(name, str):
            return []
        reply = reply_from_label(full_name, number, name, payload.get("sender"), issue.get("updated_at"),
                                 bot_login=bot_login)
        return [reply] if reply is not None else []
    return []
