"""Start, cancel and list loops from chat: ``run <loop>``, ``cancel [run] [reason]``, ``loops``.

The vote path hands these verbs here (``VotePath``), so they are answered as
votes are: one ``Answer`` worded for a person - a refusal saying who may, an
unknown loop with a did-you-mean, a loop whose one slot is taken naming the
run that holds it. Who may is a loop's ``operators:`` (default: its
reviewers), checked by the same ``Authorizer`` as votes; a cancel is checked
on the run's own places (where its review was posted), as a vote on that
review would be. A GitHub comment never starts a run: an issue belongs to a
review, and a comment anyone with access can write is no way to spend a
loop's budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from adapters.channel import Answer, AnswerKind, Reply
from adapters.commands import Command
from adapters.suggest import did_you_mean

from bot.review_records import Reviewers
from bot.store.base import Store, UnknownRunError

from .authorize import Authorizer
from .votes import _where

__all__ = ["RunControl"]

log = logging.getLogger(__name__)


class _Loop(Protocol):
    name: str

    def operator_policy(self) -> Reviewers: ...


class RunControl:
    """Answers the run-control verbs; ``start(loop, trigger)`` and ``cancel(run, by, reason)`` are the runner's."""

    def __init__(
        self,
        store: Store,
        authorizer: Authorizer,
        loops: Sequence[_Loop],
        *,
        start: Callable[[str, str], str | None],
        cancel: Callable[[str, str, str], str],
        listing: Callable[[], str],
    ) -> None:
        self._store = store
        self._authorizer = authorizer
        self._loops = {loop.name: loop for loop in loops}
        self._start = start
        self._cancel = cancel
        self._listing = listing

    def __call__(self, reply: Reply) -> Answer:
        command = reply.command
        assert isinstance(command, Command)
        if command.verb == "loops":
            return Answer(AnswerKind.INFO, self._listing())
        if command.verb == "run":
            return self._run(reply, command.target or "")
        return self._cancel_run(reply, command)

    def _refusal(self, loop: str, reply: Reply, where: Mapping[str, Any] | None) -> str | None:
        found = self._loops.get(loop)
        if found is None:  # a run of a loop gone from the config: its reviewers' rules went with it
            return None
        refusal = self._authorizer.refusal(found.operator_policy(), reply.voter.qualified, where)
        if refusal is None:
            return None
        if getattr(found, "operators", None) is None:
            return f"{refusal} (the operators of loop {loop} may: it names none, so its reviewers)"
        # the membership words name the reviewers' keys: here the same rules read the operators: block
        worded = refusal.replace("review.reviewers.", "operators.").replace("reviewers", "operators")
        return f"{worded} (the operators of loop {loop} may)"

    def _run(self, reply: Reply, loop: str) -> Answer:
        if reply.voter.channel == "github":
            return Answer(AnswerKind.REFUSED, "a GitHub comment does not start a run: use `/loopbot run "
                                              f"{loop}` in Slack or `loopbot run {loop}` on the server")
        if loop not in self._loops:
            hint = did_you_mean(loop, list(self._loops)) or f"; the loops: {', '.join(self._loops) or 'none'}"
            return Answer(AnswerKind.INVALID, f"no loop {loop!r}{hint}")
        refusal = self._refusal(loop, reply, None)
        if refusal is not None:
            log.info("run of loop %s by %s refused: %s", loop, reply.voter.qualified, refusal)
            return Answer(AnswerKind.REFUSED, f"not started: {refusal}")
        run_id = self._start(loop, f"{reply.via or reply.voter.channel} by {reply.voter.qualified}")
        if run_id is None:
            active = self._store.active_run(loop)
            if active is None:
                return Answer(AnswerKind.REFUSED, "not started: the bot is shutting down; ask again in a minute")
            waiting = f" on review {active.review_id}" if active.review_id else ""
            return Answer(AnswerKind.REFUSED, f"not started: loop {loop} already has an active run: "
                                              f"{active.id} is {active.status}{waiting} (`cancel {active.id}` ends it)")
        log.info("run %s of loop %s started by %s", run_id, loop, reply.voter.qualified)
        return Answer(AnswerKind.INFO, f"started run {run_id} of loop {loop}; its review is posted where the "
                                       "loop posts (`cancel " + run_id + " reason` stops it)")

    def _cancel_run(self, reply: Reply, command: Command) -> Answer:
        run_id = command.target
        where: Mapping[str, Any] | None = None
        if run_id is None and reply.context:  # the run of the one open review posted here (a GitHub issue)
            here = self._store.open_reviews_posted_at(reply.voter.channel, reply.context)
            if len(here) != 1:
                named = f" ({', '.join(r.run_id for r in here)})" if here else ""
                return Answer(AnswerKind.UNKNOWN_REVIEW, f"which run? {len(here) or 'no'} open review(s) here{named}; "
                                                         "name the run, e.g. `cancel demo-run-3 reason`")
            run_id = here[0].run_id
        if run_id is None:
            return Answer(AnswerKind.INVALID, "which run? name it, e.g. `cancel demo-run-3 the plan is wrong`")
        try:
            run = self._store.get_run(run_id)
        except UnknownRunError:
            return Answer(AnswerKind.UNKNOWN_REVIEW, f"no run {run_id!r}; `loops` lists each loop's last run")
        if run.review_id:
            try:
                review = self._store.get_review(run.review_id)
            except LookupError:
                review = None
            if review is not None:
                where = _where(review, reply)
        refusal = self._refusal(run.loop, reply, where)
        if refusal is not None:
            log.info("cancel of run %s by %s refused: %s", run.id, reply.voter.qualified, refusal)
            return Answer(AnswerKind.REFUSED, f"cancel refused: {refusal}")
        try:
            done = self._cancel(run.id, reply.voter.qualified, command.argument)
        except (ValueError, LookupError) as err:
            return Answer(AnswerKind.REFUSED, str(err))
        return Answer(AnswerKind.INFO, done[0].upper() + done[1:], run.review_id)

