"""The embedded default channel: each review is a markdown file, answered with ``loopbot decide``.

It needs no credentials, so a fresh clone can run the demo loop and a person
can approve it from a second terminal. The file reads in the order a person
decides: what is asked, the proposal (whole), who may answer and how, then
the details (loop, run, trigger, state, failures). The decide lines are
printed only when ``loopbot decide`` would count them (the loop is open to
anyone, or lists local reviewers); else the file says where to answer. It
is also the review's audit trail: once decided it shows the outcome instead
of how to answer, and every update (reminders, the outcome) follows.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text, read_text_no_follow

from loop_engine.markdown import escape_inline

from .channel import Answer, ChannelError, MessageRef, ReviewPost, Target
from .local_answers import answer_as, answer_elsewhere, answer_lines, local_votes_count
from .review_text import asked, diagnostics_lines, proposal_lines

__all__ = ["LocalChannel"]

logger = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_UPDATES_HEADING = "## Updates"
#: Each update is a "- " bullet; continuation lines are indented.
_ENTRY_START = re.compile(r"\n(?=- )")


def _places(post: ReviewPost) -> str:
    slack = "slack" in post.reviewers
    github = "github" in post.reviewers or bool(post.min_permission)
    if slack != github:
        return "in its Slack thread" if slack else "on its GitHub issue"
    return "in its Slack thread or on its GitHub issue"


def _post_answer_as(post: ReviewPost) -> tuple[str, str]:
    """``answer_as`` for a post whose decide lines count (``local_votes_count``)."""
    return answer_as(post.reviewers.get("local")) if post.restricted else ("", "")


def _who(post: ReviewPost) -> str:
    """Who may answer (the names the loop gives, local ones or its people) and how many must agree."""
    names = post.reviewers_hint or ", ".join(post.reviewers.get("local") or ())
    if names:
        return f"**Who can answer:** needs {post.approvals_required} of: {escape_inline(names)}"
    return f"**Approvals needed:** {post.approvals_required}"


def _outcome(post: ReviewPost) -> list[str]:
    outcome = post.outcome
    if outcome is None:
        return [f"This review is {post.status}."]
    word = {"approve": "Approved", "reject": "Rejected", "retry": "Retry asked", "modify": "Changed and approved"}
    how = word.get(outcome.decision, outcome.decision.capitalize())
    by = "by the timeout's default" if outcome.timed_out else "by " + ", ".join(outcome.decided_by)
    reason = f": {outcome.reason.strip()}" if outcome.reason.strip() else ""
    return [f"**{how}** {by}{reason}"]


class LocalChannel:
    """Writes ``<directory>/<review_id>.md`` atomically and logs where it is and how to approve it.

    ``decide_command`` is the command line printed in front of the review id,
    so a bot started with a non-default ``--config`` can print lines that
    work when pasted.
    """

    name = "local"

    def __init__(
        self,
        directory: str | Path,
        log: logging.Logger = logger,
        *,
        decide_command: str = "loopbot decide",
    ) -> None:
        self.directory = Path(directory)
        self.log = log
        self.decide_command = decide_command
        self._lock = threading.Lock()

    def path_for(self, review_id: str) -> Path:
        if not _SAFE_ID.match(review_id):
            raise ChannelError(f"review id {review_id!r} cannot name a file; ids look like <loop>-<n>")
        return self.directory / f"{review_id}.md"

    def _ref(self, review_id: str) -> MessageRef:
        return MessageRef(self.name, {"review_id": review_id, "file": f"{review_id}.md"}, "local")

    def _render(self, post: ReviewPost) -> str:
        lines = [
            f"<!-- loopbot:review={post.review_id} -->",
            f"# Review {post.review_id}: {escape_inline(asked(post.request))}",
            "",
        ]
        if proposal := proposal_lines(post.request):
            lines += [*proposal, ""]
        if post.status == "open":  # a decided review's file keeps its record, not lines that are refused now
            lines += ["## How to answer", "", _who(post), ""]
            if local_votes_count(post.reviewers.get("local"), post.restricted):
                as_option, who = _post_answer_as(post)
                lines += ["```sh", *answer_lines(post.review_id, self.decide_command, as_option), "```", ""]
                lines += [who, ""] if who else []
            else:
                lines += [answer_elsewhere(_places(post)), ""]
        else:
            lines += ["## Outcome", "", *_outcome(post), ""]
        lines += ["## Details", "", f"- **Loop:** {escape_inline(post.loop)}",
                  f"- **Run:** {escape_inline(post.run_id)}",
                  *diagnostics_lines(post.request, is_open=post.status == "open"), ""]
        return "\n".join(lines)

    def _approve_line(self, post: ReviewPost) -> str:
        """The log's "approve with:" line (naming who may answer locally), or where to answer instead."""
        if not local_votes_count(post.reviewers.get("local"), post.restricted):
            return answer_elsewhere(_places(post))
        as_option, who = _post_answer_as(post)
        line = answer_lines(post.review_id, self.decide_command, as_option)[0]
        return f"{line} ({who})" if who else line  # one line: the log escapes a newline into a visible "\n"

    def _write(self, path: Path, text: str) -> None:
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise ChannelError(f"cannot write review file {path}: {exc.strerror or exc}") from exc

    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        """(Re)write the review file; the same review always gets the same file and ref."""
        path = self.path_for(post.review_id)
        text = self._render(post)
        with self._lock:
            self._write(path, text)
        # One line: the file holds the review (a log of whole reviews buries everything else in it).
        self.log.info(
            "review %s (loop %s, run %s) is waiting for a decision: %s - approve with: %s",
            post.review_id, post.loop, post.run_id, path, self._approve_line(post),
        )
        return self._ref(post.review_id)

    def _append_update(self, post: ReviewPost, text: str) -> Path:
        """Add ``text`` under "Updates" unless it is already there (a repeat after a crash)."""
        path = self.path_for(post.review_id)
        entry = "- " + text.strip().replace("\n", "\n  ")
        with self._lock:
            try:
                current = read_text_no_follow(path)  # a planted link must not copy another file in
            except FileNotFoundError:
                current = self._render(post)
            except OSError as exc:
                raise ChannelError(f"cannot read review file {path}: {exc.strerror or exc}") from exc
            head, marker, updates = current.partition(f"\n{_UPDATES_HEADING}\n")
            if post.status != "open":  # decided: the head loses "How to answer"; the updates are kept
                head = self._render(post)
            entries = _ENTRY_START.split(updates.strip("\n")) if marker and updates.strip() else []
            if entry in entries:
                return path
            entries.append(entry)
            self._write(path, head.rstrip("\n") + f"\n\n{_UPDATES_HEADING}\n\n" + "\n".join(entries) + "\n")
        return path

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        if ref.channel != self.name:
            raise ChannelError(f"the local channel cannot update a {ref.channel!r} message")
        path = self._append_update(post, text)
        self.log.info("review %s: %s (%s)", post.review_id, text.strip(), path)

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        """``text`` is the whole notice (the bot's says "Escalated: ..."), so it is written as given."""
        path = self._append_update(post, text)
        self.log.warning(
            "%s (loop %s) - %s - approve with: %s",
            text.strip(), post.loop, path, self._approve_line(post),
        )
        return self._ref(post.review_id)

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        """``loopbot decide`` prints the answer itself; here it only reaches the log."""
        self.log.info("review %s: %s", answer.review_id or "-", answer.text)
