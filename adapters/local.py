"""The embedded default channel: each review is a markdown file, answered with ``loopbot decide``.

It needs no credentials, so a fresh clone can run the demo loop and a person
can approve it from a second terminal. The file is also the review's audit
trail: the request, how to answer, then every update (reminders, the outcome).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text, read_text_no_follow

from .channel import Answer, ChannelError, MessageRef, ReviewPost, Target

__all__ = ["LocalChannel", "answer_lines"]

logger = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_UPDATES_HEADING = "## Updates"
#: Each update is a "- " bullet; continuation lines are indented.
_ENTRY_START = re.compile(r"\n(?=- )")


def answer_lines(review_id: str, decide_command: str = "loopbot decide") -> list[str]:
    """The exact shell lines that answer a review, one per decision."""
    prefix = f"{decide_command} {review_id}"
    return [
        f"{prefix} approve",
        f'{prefix} reject --feedback "reason"',
        f"{prefix} retry",
        f"{prefix} modify --set context.KEY=VALUE",
        f"{prefix} pause",
    ]


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
            f"# Review {post.review_id}",
            "",
            f"- **Loop:** {post.loop}",
            f"- **Run:** {post.run_id}",
        ]
        if post.reviewers_hint:
            lines.append(f"- **Who can answer:** needs {post.approvals_required} of: {post.reviewers_hint}")
        else:
            lines.append(f"- **Approvals needed:** {post.approvals_required}")
        lines += ["", post.request.to_markdown().rstrip(), "", "## How to answer", ""]
        lines += ["```sh", *answer_lines(post.review_id, self.decide_command), "```", ""]
        return "\n".join(lines)

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
        # The whole review goes to the log too: on a terminal, that is where people look.
        self.log.info(
            "review %s (loop %s, run %s) is waiting for a decision: %s\n\n%s\napprove with: %s",
            post.review_id, post.loop, post.run_id, path, text, answer_lines(post.review_id, self.decide_command)[0],
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
            text.strip(), post.loop, path, answer_lines(post.review_id, self.decide_command)[0],
        )
        return self._ref(post.review_id)

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        """``loopbot decide`` prints the answer itself; here it only reaches the log."""
        self.log.info("review %s: %s", answer.review_id or "-", answer.text)
