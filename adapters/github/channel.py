"""How is a review shown on GitHub? As an issue comment the channel can always find again.

``GitHubChannel`` posts the review comment (on the target's issue, or on one
issue it opens per run), edits it to show the outcome, swaps the
``loopbot:*`` labels, answers voters and posts escalations. Every method may
be retried by the bot's outbox after a failure or a crash, so each one looks
for its own earlier comment by a hidden marker before it posts:

- the review comment starts with ``<!-- loopbot:review=ID -->``;
- the run's issue body holds ``<!-- loopbot:run=RUN_ID -->``;
- a proposal too long for one comment goes on in comments marked
  ``<!-- loopbot:more=ID.review.N -->``, posted in order, each only once;
- escalations, reminders and answers carry markers of their own.

Labels follow the review's structured outcome (``ReviewPost.outcome``),
never its text: an issue carries at most one outcome label, a new review on
it takes the previous one's away, and a label is removed only when the
issue has it.

Review ids are predictable, so anyone may post a marker first: a comment is
taken for the channel's own only when loopbot wrote it, and so the channel
posts nothing while it does not know who it is on GitHub (``BotIdentity``:
each post first learns it, or fails with a retryable ``ChannelError`` that
the outbox retries).

It never decides anything and never sleeps: a failed call is a
``ChannelError`` (``retry_after`` on rate limits, ``permanent`` for a deleted
issue) for the outbox to schedule.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from loop_engine.markdown import escape_inline

from ..channel import Answer, AnswerKind, ChannelError, MessageRef, ReviewPost, Target
from .client import Comment, IssueInfo
from ..inert import github_text
from .events import OWN_MARKER
from .identity import BotIdentity, Me
from .render import (
    answer_marker,
    escalation_marker,
    fit_comment,
    more_marker,
    outcome_is_cut,
    outcome_key,
    outcomes_in,
    render_escalation,
    render_more,
    render_review,
    review_marker,
    review_parts,
    run_marker,
    update_parts,
)

__all__ = [
    "AWAITING_LABEL",
    "ChannelAPI",
    "GitHubChannel",
    "OUTCOME_LABELS",
    "RUN_LABEL",
]

log = logging.getLogger(__name__)

RUN_LABEL = "loopbot"
AWAITING_LABEL = "loopbot:awaiting-review"
#: The label an outcome leaves, by its decision (``PostOutcome.decision``).
OUTCOME_LABELS = {
    "approve": "loopbot:approved",
    "reject": "loopbot:rejected",
    "retry": "loopbot:retried",
    "modify": "loopbot:modified",
}
#: Every label an earlier outcome may have left (``loopbot:paused``: older versions labelled a pause).
_OUTCOME_LABEL_SET = frozenset([*OUTCOME_LABELS.values(), "loopbot:paused"])
_REVIEW_MARKER_PREFIX = "<!-- loopbot:review="
_HOW_TO = "\n## How to answer\n"
#: Reactions on the voter's comment, by answer (👀 on receipt is the intake's business).
_REACTIONS = {
    AnswerKind.COUNTED: "rocket",
    AnswerKind.DECIDED: "rocket",
    AnswerKind.REFUSED: "-1",
    AnswerKind.INVALID: "confused",
}


#: Seconds the channel trusts one listing of an issue's answers (about an outbox round): see ``_AnswersSeen``.
ANSWERS_FRESH = 5.0


class _AnswersSeen:
    """The first lines of our comments on one issue updated since ``since``: one listing, plus what we posted after.

    Answers to a burst of votes on one issue then share one listing instead of one each (the listing is the
    heaviest of an answer's calls: every comment since the vote). Only this channel's posts, under its lock,
    come after the listing; a post that failed forgets the listing (GitHub may have made it anyway).
    """

    __slots__ = ("since", "lines", "at")

    def __init__(self, since: datetime | None, lines: list[str], at: float) -> None:
        self.since, self.lines, self.at = since, lines, at

    def covers(self, since: datetime | None, now: float) -> bool:
        """Would a listing since ``since`` made now show nothing of ours this one lacks?"""
        if now - self.at > ANSWERS_FRESH:
            return False
        return self.since is None or (since is not None and since >= self.since)

    def has(self, marker: str) -> bool:
        return any(line.startswith(marker) for line in self.lines)


class ChannelAPI(Protocol):
    """The GitHub calls the channel makes (``GitHubClient`` implements them)."""

    def create_comment(self, repository: str, issue: int, body: str) -> Comment: ...
    def get_comment(self, repository: str, comment_id: int) -> Comment: ...
    def edit_comment(self, repository: str, comment_id: int, body: str) -> None: ...
    def list_comments(self, repository: str, issue: int, since: datetime | None = None) -> list[Comment]: ...
    def add_reaction(self, repository: str, comment_id: int, content: str) -> None: ...
    def create_issue(self, repository: str, title: str, body: str, labels: Sequence[str] = ()) -> IssueInfo: ...
    def get_issue(self, repository: str, issue: int) -> IssueInfo: ...
    def list_issues(self, repository: str, label: str) -> list[IssueInfo]: ...
    def add_labels(self, repository: str, issue: int, *labels: str) -> None: ...
    def remove_label(self, repository: str, issue: int, label: str) -> None: ...
    def me(self) -> Me: ...


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


def _quote(text: str, limit: int = 300) -> list[str]:
    """The voter's words as a block quote: a few lines, HTML-escaped (no markers or tags of theirs)."""
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()][:3]
    shown = "\n".join(lines)
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    shown = github_text(shown)  # no HTML, mention or link of theirs in the bot's voice
    return [f"> {line}" for line in shown.split("\n")] if shown else []


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class GitHubChannel:
    """A ``Channel`` that shows reviews as GitHub issue comments.

    ``bot_login`` (a ``BotIdentity`` that learns the token's user or the
    App's ``slug[bot]``, or a known login; without it, one learned through
    ``api.me()``) is required of a comment before the channel takes it for
    its own; while it is unknown the channel posts nothing.
    """

    name = "github"

    def __init__(self, api: ChannelAPI, *, bot_login: BotIdentity | str | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self._monotonic = monotonic
        self._answers_seen: dict[tuple[str, int], _AnswersSeen] = {}
        # no identity given: learn it from the API, before the first post
        self.identity = BotIdentity(api.me) if bot_login is None else BotIdentity.of(bot_login)
        self._run_issues: dict[tuple[str, str], int] = {}
        # One write at a time: two outbox workers must not both miss a marker and post twice, and GitHub
        # asks integrations to make content-creating requests serially (secondary rate limits).
        self._lock = threading.RLock()

    # --- finding our own comments -----------------------------------------------------------
    def _ours(self, comment: Comment, marker: str) -> bool:
        """Our comment with ``marker``: written by loopbot itself (its login), whatever the text says."""
        if not comment.body.lstrip().startswith(marker):
            return False
        return comment.login.casefold() == self.identity.require().login.casefold()

    def _find(self, repository: str, issue: int, marker: str, since: datetime | None = None) -> Comment | None:
        self.identity.require()  # before reading: a comment is ours only if we know who we are
        for comment in self.api.list_comments(repository, issue, since):
            if self._ours(comment, marker):
                return comment
        return None

    def _post_once(self, repository: str, issue: int, marker: str, body: str,
                   since: datetime | None = None) -> Comment:
        """Post ``body`` (which starts with ``marker``) unless a comment of ours with that marker is there."""
        with self._lock:
            found = self._find(repository, issue, marker, since)
            if found is not None:
                return found
            return self.api.create_comment(repository, issue, fit_comment(body))

    def _answer_once(self, repository: str, issue: int, marker: str, body: str, since: datetime | None) -> None:
        """``_post_once`` for a voter's answer, listing the issue's comments only when no fresh listing covers it."""
        where = (repository.casefold(), issue)
        with self._lock:
            now = self._monotonic()
            seen = self._answers_seen.get(where)
            if seen is None or not seen.covers(since, now):
                self.identity.require()
                ours = [comment.body.lstrip() for comment in self.api.list_comments(repository, issue, since)
                        if self._ours(comment, OWN_MARKER)]
                seen = _AnswersSeen(since, [text.split("\n", 1)[0] for text in ours], now)
                self._forget_stale_answers(now)
                self._answers_seen[where] = seen
            if seen.has(marker):
                return
            try:
                self.api.create_comment(repository, issue, fit_comment(body))
            except BaseException:
                self._answers_seen.pop(where, None)
                raise
            seen.lines.append(marker)

    def _forget_stale_answers(self, now: float) -> None:
        for where in [where for where, seen in self._answers_seen.items() if now - seen.at > ANSWERS_FRESH]:
            del self._answers_seen[where]

    def _post_all_once(self, repository: str, issue: int, bodies: Sequence[tuple[str, str]]) -> None:
        """Post each (marker, body) in order unless a comment of ours with its marker is there (one listing)."""
        if not bodies:
            return
        with self._lock:
            self.identity.require()
            present = list(self.api.list_comments(repository, issue))
            for marker, body in bodies:
                if not any(self._ours(comment, marker) for comment in present):
                    self.api.create_comment(repository, issue, fit_comment(body))

    def _post_rest(self, repository: str, issue: int, post: ReviewPost, kind: str) -> None:
        """The comments that carry on a proposal too long for the first one, each posted once, in order."""
        parts = review_parts(post)
        more = [(more_marker(post.review_id, n, kind), render_more(post, parts, n, kind))
                for n in range(2, len(parts) + 1)]
        self._post_all_once(repository, issue, more)

    def _issue_for(self, target: Target, post: ReviewPost) -> tuple[str, int]:
        if target.kind != self.name or not target.repository:
            raise ChannelError(f"the github channel cannot post to a {target.kind!r} target", permanent=True)
        if target.issue is not None:
            return target.repository, target.issue
        return target.repository, self._run_issue(target.repository, post)

    def _run_issue(self, repository: str, post: ReviewPost) -> int:
        """The run's own issue: found by its marker among issues labelled ``loopbot``, else opened."""
        key = (repository, post.run_id)
        with self._lock:
            if key not in self._run_issues:
                self._run_issues[key] = self._find_or_open_run_issue(repository, post)
            return self._run_issues[key]

    def _find_or_open_run_issue(self, repository: str, post: ReviewPost) -> int:
        marker = run_marker(post.run_id)
        me = self.identity.require().login.casefold()
        number = next((i.number for i in self.api.list_issues(repository, RUN_LABEL)
                       if i.body.lstrip().startswith(marker) and i.login.casefold() == me), None)
        if number is None:
            body = (
                f"{marker}\nloopbot opened this issue for run `{escape_inline(post.run_id)}` of loop "
                f"`{escape_inline(post.loop)}`: its reviews are posted here as comments, and are answered here."
            )
            title = f"loopbot: {post.loop} run {post.run_id}"
            number = self.api.create_issue(repository, title, body, [RUN_LABEL]).number
        return number

    def _other_open_reviews(self, repository: str, issue: int, comment_id: int) -> bool:
        """Does another review of ours on this issue still invite answers (so it stays awaiting-review)?"""
        return any(
            comment.id != comment_id and self._ours(comment, _REVIEW_MARKER_PREFIX) and _HOW_TO in comment.body
            for comment in self.api.list_comments(repository, issue)
        )

    @staticmethod
    def _ref_data(ref: MessageRef) -> tuple[str, int, int]:
        try:
            return str(ref.data["repository"]), int(ref.data["issue"]), int(ref.data["comment_id"])
        except (KeyError, TypeError, ValueError):
            raise ChannelError(f"not a GitHub message reference: {ref.data!r}", permanent=True) from None

    def _labels(self, repository: str, issue: int) -> set[str]:
        return set(self.api.get_issue(repository, issue).labels)

    def _set_outcome_label(self, repository: str, issue: int, wanted: str | None, present: set[str]) -> None:
        """Exactly ``wanted`` among the outcome labels (none when None); only labels the issue has are removed."""
        for label in sorted(present & _OUTCOME_LABEL_SET):
            if label != wanted:
                self.api.remove_label(repository, issue, label)
        if wanted is not None and wanted not in present:
            self.api.add_labels(repository, issue, wanted)

    # --- Channel ------------------------------------------------------------------------------
    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        repository, issue = self._issue_for(target, post)
        comment = self._post_once(repository, issue, review_marker(post.review_id), render_review(post))
        self._post_rest(repository, issue, post, "review")
        return self._posted(target, post, repository, issue, comment)

    def _posted(self, target: Target, post: ReviewPost, repository: str, issue: int, comment: Comment) -> MessageRef:
        """The ref of a review's comment; an open review's issue is awaiting, without an earlier outcome's label."""
        if post.status == "open":
            present = self._labels(repository, issue)
            self._set_outcome_label(repository, issue, None, present)
            if AWAITING_LABEL not in present:
                self.api.add_labels(repository, issue, AWAITING_LABEL)
        data: dict[str, Any] = {"repository": repository, "issue": issue, "comment_id": comment.id,
                                "url": comment.html_url}
        if comment.created_at is not None:  # GitHub's time: a label older than this is no answer to it
            data["posted_at"] = comment.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return MessageRef(self.name, data, target.key)

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        """A reminder (review still open) becomes a reply; an outcome is written into the review comment.

        Outcomes accumulate in the comment (decided, then the run's end), the
        labels go from ``loopbot:awaiting-review`` to the one of
        ``post.outcome``, and every update but the plain decision (which the
        voter was already answered about) is also a reply comment, so the
        people watching are notified; a decision too long for the review
        comment (cut there with "…") is a reply comment too, whole.
        """
        if ref.channel != self.name:
            raise ChannelError(f"the github channel cannot update a {ref.channel!r} message", permanent=True)
        repository, issue, comment_id = self._ref_data(ref)
        text = text.strip()
        if post.status != "open":
            current = self.api.get_comment(repository, comment_id)
            outcomes = outcomes_in(current.body)
            key = outcome_key(text)
            if key not in {known for known, _ in outcomes}:
                outcomes.append((key, text))
                self.api.edit_comment(repository, comment_id, render_review(post, outcomes))
            present = self._labels(repository, issue)
            wanted = OUTCOME_LABELS.get(post.outcome.decision) if post.outcome is not None else None
            self._set_outcome_label(repository, issue, wanted, present)
            if AWAITING_LABEL in present and not self._other_open_reviews(repository, issue, comment_id):
                self.api.remove_label(repository, issue, AWAITING_LABEL)
        timed_out = post.outcome is not None and post.outcome.timed_out
        if post.status == "decided" and not timed_out and not outcome_is_cut(text):
            return
        marker = answer_marker(f"update:{post.review_id}:{_short_hash(text)}")
        url = str(ref.data["url"]) if ref.data.get("url") else None
        bodies = update_parts(post, marker, text, url)
        self._post_all_once(repository, issue, [(body.split("\n", 1)[0], body) for body in bodies])

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        repository, issue = self._issue_for(target, post)
        body = render_escalation(post, text)
        comment = self._post_once(repository, issue, escalation_marker(post.review_id), body)
        self._post_rest(repository, issue, post, "escalation")
        return self._posted(target, post, repository, issue, comment)

    def acknowledge(self, respond: Mapping[str, Any]) -> None:
        """👀 on a voter's comment, to say it arrived (the bot may call this on receipt, before deciding)."""
        if respond.get("comment_id") is not None and respond.get("repository"):
            self.api.add_reaction(str(respond["repository"]), int(respond["comment_id"]), "eyes")

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        """A reaction on the voter's comment and a reply comment quoting them (a redelivery gets neither)."""
        try:
            repository, issue = str(respond["repository"]), int(respond["issue"])
        except (KeyError, TypeError, ValueError):
            raise ChannelError(f"cannot answer on GitHub without repository and issue: {dict(respond)!r}",
                               permanent=True) from None
        if answer.kind is AnswerKind.DUPLICATE:
            return
        self.acknowledge(respond)  # 👀 first: "seen", then what became of it
        comment_id = respond.get("comment_id")
        reaction = _REACTIONS.get(answer.kind)
        if comment_id is not None and reaction is not None:
            self.api.add_reaction(repository, int(comment_id), reaction)  # GitHub keeps one per user and kind
        key = str(respond.get("key") or f"{comment_id}")
        marker = answer_marker(f"{key}:{answer.kind.value}")
        login = str(respond.get("login") or "")
        lines = [marker]
        lines += _quote(str(respond.get("quote") or ""))
        text = answer.text.strip()
        mention = f"@{login} " if login else ""
        if "\n" in text:
            lines += ["", f"{mention}".rstrip(), "", "```text", text.replace("```", "'''"), "```"]
        else:
            lines += ["", f"{mention}{github_text(' '.join(text.split()))}"]
        self._answer_once(repository, issue, marker, "\n".join(lines), _parse_time(respond.get("created_at")))
