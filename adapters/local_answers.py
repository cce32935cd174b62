"""How a review is answered with ``loopbot decide``: the lines to paste, who they name, where else to answer.

Plain text from plain values, apart from the local channel that writes them
into each review's file (``adapters.local``): ``loopbot status``, the pages
and the server's log say the same lines without loading a channel (and its
review types and file writing) to do so.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["answer_as", "answer_elsewhere", "answer_lines", "local_votes_count"]


def answer_lines(review_id: str, decide_command: str = "loopbot decide", as_option: str = "") -> list[str]:
    """The exact shell lines that answer a review, one per decision; ``as_option`` (" --as alice") ends each."""
    prefix = f"{decide_command} {review_id}"
    return [
        f"{prefix} approve{as_option}",
        f'{prefix} reject --feedback "reason"{as_option}',
        f"{prefix} retry{as_option}",
        f"{prefix} modify --set context.KEY=VALUE{as_option}",
        f"{prefix} pause{as_option}",
    ]


def answer_as(local: Sequence[str] | None, voter: str | None = None) -> tuple[str, str]:
    """How a decide line names its voter when the loop lists local reviewers: (" --as ...", who may answer).

    ``local`` is the loop's ``review.reviewers.local`` (None: no list);
    ``voter`` is who would run the line ($USER in the CLI), None where that is
    unknown (the review file and the server's log, read by anyone). Nothing
    is added without a list or when ``voter`` is on it. One name is written
    in (``--as alice``); of several the reader picks theirs, so a pasted line
    never records a vote in someone else's name: ``--as NAME`` and
    "NAME: one of alice, bob".
    """
    if not local or (voter is not None and voter.casefold() in {name.casefold() for name in local}):
        return "", ""
    if len(local) == 1:
        return f" --as {local[0]}", f"only {local[0]} may answer locally"
    return " --as NAME", f"NAME: one of the local reviewers {', '.join(local)}"


def local_votes_count(local: Sequence[str] | None, restricted: bool) -> bool:
    """Would ``loopbot decide`` count a vote (with ``--as`` a listed name)? Open to anyone, or local names listed."""
    return not restricted or bool(local)


def answer_elsewhere(places: str) -> str:
    """What the file, the log and ``status`` say instead of decide lines nobody may use: where to answer."""
    return (f"Nobody may answer locally (the loop's review.reviewers.local lists nobody): answer {places}, "
            "where the review was posted.")
