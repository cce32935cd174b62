"""The one vote path: every answer - ``loopbot decide``, a Slack button, a GitHub comment - walks it.

authorise -> cast -> answer -> apply. An adapter hands over a ``Reply``
(who, which review or the message it answers, the parsed command, a dedupe
key); this module finds the review, checks the voter against the loop's
reviewers through the channel's membership (outside the store lock: it may
ask an API), casts the vote under the lock with the pure rules of
``bot.reviews``, and answers with exactly one ``Answer`` worded for a
person. A vote that decides the review is handed to ``apply`` at once -
the process holding the runner resumes the run without waiting for a tick.
Replies that arrive together (``handle_many``: Slack's, batched by
``adapters.vote_batches``) cost one read and one write per review, not per vote.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from adapters.channel import Answer, AnswerKind, Identity, MessageRef, Reply
from adapters.commands import HELP_TEXT, CommandError, identity_problem

from bot.reviews import (
    ALREADY_DECIDED,
    DECIDED,
    DUPLICATE,
    REFUSED,
    Review,
    Vote,
)
from bot.store.base import Store, StoreError, UnknownReviewError

from .authorize import Authorizer
from .people import People

__all__ = ["VotePath"]

log = logging.getLogger(__name__)

#: A vote ready to cast: the review as read, the vote, and why its voter may not answer (None: they may).
_Cast = tuple[Review, Vote, "str | None"]

_KINDS = {
    DECIDED: AnswerKind.DECIDED,
    REFUSED: AnswerKind.REFUSED,
    DUPLICATE: AnswerKind.DUPLICATE,
    ALREADY_DECIDED: AnswerKind.ALREADY_DECIDED,
}


class VotePath:
    """``handle(reply) -> Answer`` for every channel; thread-safe (the store serialises the casting)."""

    def __init__(
        self,
        store: Store,
        authorizer: Authorizer,
        *,
        clock: Callable[[], datetime],
        people: People | None = None,
        apply: Callable[[str], object] | None = None,
    ) -> None:
        self._store = store
        self._authorizer = authorizer
        self._clock = clock
        self._people = people or People()
        self._apply = apply

    def handle(self, reply: Reply) -> Answer:
        answer = self.handle_many([reply])[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def handle_many(self, replies: Sequence[Reply]) -> list[Answer | Exception]:
        """One answer per reply, in order; the votes on one review are cast in one write of it.

        Each review is read once for all its replies (to find it and check
        the voters) and written once for all its votes, which are cast in
        the order they came. A review that cannot be written fails its own
        replies (an exception in place of their answers), not the others'.
        """
        answers: dict[int, Answer | Exception] = {}
        found: dict[str, Review | UnknownReviewError] = {}
        casts: dict[str, list[tuple[int, Vote, str | None]]] = {}
        for index, reply in enumerate(replies):
            try:
                prepared = self._prepare(reply, found)
            except Exception as err:  # noqa: BLE001 - that reply's answer: its sender is told, the others go on
                answers[index] = err
                continue
            if isinstance(prepared, Answer):
                answers[index] = prepared
            else:
                review, vote, refusal = prepared
                casts.setdefault(review.id, []).append((index, vote, refusal))
        if casts:
            answers.update(self._cast(casts))
        return [answers[index] for index in range(len(replies))]

    def _prepare(self, reply: Reply, found: dict[str, Review | UnknownReviewError]) -> Answer | _Cast:
        """The answer that needs no vote (help, status, refusals), or the vote to cast."""
        command = reply.command
        if isinstance(command, CommandError):
            return Answer(AnswerKind.INVALID, str(command), reply.review_id)
        problem = identity_problem(reply.voter.id)
        if problem is not None:
            return Answer(AnswerKind.REFUSED, f"vote refused: {problem}", reply.review_id)
        if command.verb == "help":
            return Answer(AnswerKind.INFO, HELP_TEXT)
        if command.verb == "status":
            return Answer(AnswerKind.INFO, self._status(reply.voter, command.review_id))
        review = self._review(reply, found)
        if isinstance(review, Answer):
            return review
        decision = command.decision
        assert decision is not None  # status and help were answered above
        voter = reply.voter.qualified
        # may ask an API (a GitHub permission): outside the store lock
        refusal = self._authorizer.refusal(review.policy.reviewers, voter, _where(review, reply))
        if refusal is None and review.outcome is None and "plan" in command.modifications:
            problem = plan_changes_problem(self._store, review.run_id, command.modifications["plan"])
            if problem is not None:  # refused now, not when the run resumes and fails with it
                log.info("review %s: %s modify refused: %s", review.id, voter, problem)
                return Answer(AnswerKind.REFUSED, f"vote refused: {problem}", review.id)
        vote = Vote(
            voter=voter, decision=decision, feedback=command.argument, modifications=dict(command.modifications),
            at=self._clock(), source=reply.via or reply.voter.channel, delivery_key=reply.dedupe_key,
            person=self._people.person_of(voter),
        )
        return review, vote, refusal

    # -- which review ----------------------------------------------------------------

    def _review(self, reply: Reply, found: dict[str, Review | UnknownReviewError]) -> Review | Answer:
        if reply.review_id:
            review = found.get(reply.review_id)
            if review is None:
                try:
                    review = self._store.get_review(reply.review_id)  # who may answer; cast_votes reads it again
                except UnknownReviewError as err:
                    review = err
                found[reply.review_id] = review
            if isinstance(review, UnknownReviewError):
                return Answer(AnswerKind.UNKNOWN_REVIEW, str(review), reply.review_id)
            return review
        if reply.context:
            here = self._store.open_reviews_posted_at(reply.voter.channel, reply.context)
            if len(here) == 1:
                return here[0]
            if here:
                ids = ", ".join(r.id for r in here)
                return Answer(AnswerKind.UNKNOWN_REVIEW,
                              f"several reviews are open here ({ids}): name one, e.g. `approve {here[0].id}`")
            return Answer(AnswerKind.UNKNOWN_REVIEW, "no review is open here; name one, e.g. `approve demo-3`"
                          " (`status` lists the open reviews)")
        return Answer(AnswerKind.UNKNOWN_REVIEW, "which review? name it, e.g. `approve demo-3`"
                      " (`status` lists the open reviews)")

    # -- casting -------------------------------------------------------------------

    def _cast(self, casts: dict[str, list[tuple[int, Vote, str | None]]]) -> dict[int, Answer | Exception]:
        """Cast every review's votes (one store call for the batch); apply the reviews they decided."""
        cast = self._store.cast_votes({review_id: [(vote, refusal) for _, vote, refusal in group]
                                       for review_id, group in casts.items()})
        answers: dict[int, Answer | Exception] = {}
        for review_id, group in casts.items():
            results = cast[review_id]
            if isinstance(results, Exception):
                answers.update((index, results) for index, _, _ in group)
                continue
            for (index, vote, _), result in zip(group, results, strict=True):
                log.info("review %s: %s %s via %s: %s", review_id, vote.voter, vote.decision.name.lower(),
                         vote.source, result.message)
                answers[index] = Answer(_KINDS.get(result.kind, AnswerKind.COUNTED), result.message, review_id)
            if self._apply is not None and any(result.outcome is not None for result in results):
                try:
                    self._apply(review_id)
                except Exception:  # the vote is recorded; the tick applies it if this attempt could not
                    log.exception("review %s is decided but could not be applied now; the tick retries", review_id)
        return answers

    # -- status --------------------------------------------------------------------

    def _status(self, voter: Identity, review_id: str | None) -> str:
        reviews = self._store.open_reviews()
        if review_id:
            reviews = [r for r in reviews if r.id.casefold() == review_id.casefold()]
        mine = [r for r in reviews if self._authorizer.refusal(r.policy.reviewers, voter.qualified) is None]
        if not mine:
            return "no open review is waiting for you" + (f" ({review_id} is not open)" if review_id else "")
        lines = [f"{len(mine)} open review(s) you may answer:"]
        for review in mine:
            lines.append(
                f"- {review.id} (loop {review.loop}, run {review.run_id}): "
                f"{len(review.approvals)} of {review.policy.approvals_required} approvals - `approve {review.id}`"
            )
        return "\n".join(lines)


def plan_changes_problem(store: Store, run_id: str, changes: Any) -> str | None:
    """Why ``plan`` changes cannot apply to the run's plan as it paused (its snapshot), else None.

    ``plan.skip`` must name steps the plan has, ``plan.add`` new ids whose
    dependencies the plan (or the added steps) has. The shape is checked by
    the command grammar first; a run with no readable snapshot is left to the
    engine, which checks the same when the run resumes.
    """
    if not isinstance(changes, dict):
        return None
    try:
        snapshot = store.load_snapshot(run_id)
    except (StoreError, ValueError, OSError):
        return None
    plan = (snapshot or {}).get("current_plan")
    if not isinstance(plan, dict):
        return None
    known = [step.get("id") for step in plan.get("steps") or [] if isinstance(step, dict)]
    listed = ", ".join(str(step) for step in known)
    unknown = [step for step in changes.get("skip") or [] if step not in known]
    if unknown:
        named = ", ".join(map(str, unknown))
        return f"plan.skip names step(s) the run's plan does not have: {named}; its steps: {listed}"
    ids = list(known)
    for spec in changes.get("add") or []:
        if not isinstance(spec, dict):
            continue
        if spec.get("id") in ids:
            return f"plan.add: a step {spec.get('id')!r} is already in the plan; its steps: {', '.join(map(str, ids))}"
        missing = [dep for dep in spec.get("dependencies") or [] if dep not in ids]
        if missing:
            return (f"plan.add: step {spec.get('id')!r} depends on unknown step(s) {', '.join(map(str, missing))}; "
                    f"its steps: {', '.join(map(str, ids))}")
        ids.append(spec.get("id"))
    return None


def _where(review: Review, reply: Reply) -> dict[str, Any]:
    """Where the answer was given, or else where the review was posted on the voter's channel."""
    if reply.context:
        return dict(reply.context)
    for raw in review.posts:
        ref = MessageRef.from_dict(raw)
        if ref.channel == reply.voter.channel:
            return dict(ref.data)
    return {}

