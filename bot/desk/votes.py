"""The one vote path: every answer - ``loopbot decide``, a Slack button, a GitHub comment - walks it.

authorise -> cast -> answer -> publish. An adapter hands over ``Reply``s
(who, which review or the message it answers, the parsed command, a dedupe
key); this module finds the review, checks the voter against the loop's
reviewers through the channel's membership (outside the store lock: it may
ask an API), casts the vote under the lock with the pure rules of
``bot.reviews``, and answers with exactly one ``Answer`` worded for a
person. A review a vote decides is published to ``decisions``
(``bot.desk.decisions``) at once: the runner subscribed there resumes the
run without waiting for a tick. ``handle_many`` is the entrance for every
channel: Slack's replies batched by ``adapters.vote_batches``, GitHub's by
``bot.desk.answer_queue``, the CLI's one; the replies of a batch cost one
read and one write per review, not per vote.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from adapters.channel import Answer, AnswerKind, Identity, MessageRef, Reply
from adapters.command_error import CommandError
from adapters.commands import CONTROL_VERBS, HELP_TEXT
from adapters.suggest import did_you_mean
from adapters.vote_values import identity_problem

from bot.review_records import Review, Vote
from bot.reviews import ALREADY_DECIDED, DECIDED, DUPLICATE, REFUSED
from bot.store.base import Store, StoreError, UnknownReviewError

from .authorize import Authorizer
from .decisions import Decisions
from .people import People

__all__ = ["Ballot", "VotePath"]

log = logging.getLogger(__name__)


class Ballot(NamedTuple):
    """A vote ready to cast: its reply, the review as read, the vote, and why its voter may not answer
    (None: they may), which the cast tells them after the review's own checks under the store's lock."""

    reply: Reply
    review: Review
    vote: Vote
    refusal: str | None

_KINDS = {
    DECIDED: AnswerKind.DECIDED,
    REFUSED: AnswerKind.REFUSED,
    DUPLICATE: AnswerKind.DUPLICATE,
    ALREADY_DECIDED: AnswerKind.ALREADY_DECIDED,
}


class VotePath:
    """``handle_many(replies) -> answers`` for every channel; thread-safe (the store serialises the casting)."""

    def __init__(
        self,
        store: Store,
        authorizer: Authorizer,
        *,
        clock: Callable[[], datetime],
        people: People | None = None,
        decisions: Decisions | None = None,
        loop_check: Callable[[str, dict[str, Any]], str | None] | None = None,
        control: Callable[[Reply], Answer] | None = None,
    ) -> None:
        """``loop_check(loop, modifications)``: the loop's own word on a MODIFY (``LoopCatalog``'s).
        ``control`` answers ``run``, ``cancel`` and ``loops`` (``bot.desk.control``; a serve's).
        ``decisions``: where decided reviews are published (None: ``loopbot decide``, whose decision the
        serve's tick finds in the store)."""
        self._loop_check = loop_check
        self._store = store
        self._authorizer = authorizer
        self._clock = clock
        self._people = people or People()
        self._decisions = decisions
        self._control = control
        self._write_failure: str | None = None  # why the last vote could not be stored, until one is

    def write_problem(self) -> str | None:
        """Why the store could not take the last vote (a full disk), or None once a later one was stored.

        /healthz reports it: a disk with a few kB left passes every cheap
        check yet refuses a review's write, and that is what voters meet.
        """
        return self._write_failure

    def handle(self, reply: Reply) -> Answer:
        """One reply's answer (``handle_many`` of one), its failure raised."""
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
        prepare = self.preparer(replies)
        prepared = [prepare(reply) for reply in replies]
        ballots = [ballot for ballot in prepared if isinstance(ballot, Ballot)]
        cast = iter(self.cast(ballots) if ballots else [])
        return [next(cast) if isinstance(ballot, Ballot) else ballot for ballot in prepared]

    def preparer(self, upcoming: Sequence[Reply] = ()) -> Callable[[Reply], Answer | Exception | Ballot]:
        """The first stage for the replies of one batch (``adapters.vote_batches.VoteStages``): each reply's
        answer when it needs no vote or may not vote, else its ``Ballot``; a review is read once per batch.

        The reviews the ``upcoming`` votes name are read at once, in one store call: read one by one, each
        would wait for its own round trip to the database (PostgreSQL) while the replies behind it queue.
        """
        found: dict[str, Review | UnknownReviewError | list[Review]] = {}
        named = [reply.review_id for reply in upcoming
                 if reply.review_id and getattr(reply.command, "decision", None) is not None]
        if len(named) > 1:
            try:
                found.update(self._store.get_reviews(named))
            except Exception:  # noqa: BLE001 - each reply's own read fails again, and its voter is told why
                log.debug("reading the reviews of %d votes at once failed; reading them one by one", len(named))

        def prepare(reply: Reply) -> Answer | Exception | Ballot:
            try:
                return self._prepare(reply, found)
            except Exception as err:  # noqa: BLE001 - that reply's answer: its sender is told, the others go on
                return err

        return prepare

    def cast(self, ballots: Sequence[Ballot]) -> list[Answer | Exception]:
        """The second stage: every ballot cast in one store call, one answer each, in order."""
        casts: dict[str, list[tuple[int, Vote, str | None]]] = {}
        for index, ballot in enumerate(ballots):
            casts.setdefault(ballot.review.id, []).append((index, ballot.vote, ballot.refusal))
        try:
            answers = self._cast(casts)
        except Exception as err:  # noqa: BLE001 - the store failed the batch: each of its voters is told
            return [err] * len(ballots)
        return [answers[index] for index in range(len(ballots))]

    def _prepare(self, reply: Reply, found: dict[str, Review | UnknownReviewError | list[Review]]) -> Answer | Ballot:
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
        if command.verb in CONTROL_VERBS:
            if self._control is None:
                return Answer(AnswerKind.INVALID, f"`{command.verb}` is answered by a running `loopbot serve`, "
                                                  f"or on its machine with `loopbot {command.verb}`")
            return self._control(reply)
        review = self._review(reply, found)
        if isinstance(review, Answer):
            return review
        if _written_before(review, reply):  # not an answer to this review: silent, like a redelivery
            return Answer(AnswerKind.DUPLICATE, f"written before review {review.id} was posted; not an answer to it",
                          review.id)
        decision = command.decision
        assert decision is not None  # status and help were answered above
        voter = reply.voter.qualified
        # may ask an API (a GitHub permission): outside the store lock
        refusal = self._authorizer.refusal(review.policy.reviewers, voter, _where(review, reply))
        if refusal is None and review.outcome is None and "plan" in command.modifications:
            problem = _saved_plan_problem(self._store, review.run_id, command.modifications["plan"])
            if problem is not None:  # refused now, not when the run resumes and fails with it
                log.info("review %s: %s modify refused: %s", review.id, voter, problem)
                return Answer(AnswerKind.REFUSED, f"vote refused: {problem}", review.id)
        if refusal is None and review.outcome is None and command.modifications and self._loop_check is not None:
            problem = self._loop_check(review.loop, dict(command.modifications))
            if problem is not None:  # the loop would drop the change after the decision: say so to the voter now
                log.info("review %s: %s modify refused by loop %s: %s", review.id, voter, review.loop, problem)
                return Answer(AnswerKind.REFUSED, f"vote refused: {problem}", review.id)
        vote = Vote(
            voter=voter, decision=decision, feedback=command.argument, modifications=dict(command.modifications),
            at=self._clock(), source=reply.via or reply.voter.channel, delivery_key=reply.dedupe_key,
            person=self._people.person_of(voter),
        )
        return Ballot(reply, review, vote, refusal)

    # -- which review ----------------------------------------------------------------

    def _review(self, reply: Reply, found: dict[str, Review | UnknownReviewError | list[Review]]) -> Review | Answer:
        """The review ``reply`` answers; ``found``: the reviews already read for the batch, by id or by place."""
        if reply.review_id:
            review = found.get(reply.review_id)
            assert not isinstance(review, list)  # keys of places start with a NUL, never an id's
            if review is None:
                try:
                    review = self._store.get_review(reply.review_id, history=False, votes=False)  # who may answer
                except UnknownReviewError as err:
                    review = err
                found[reply.review_id] = review
            if isinstance(review, UnknownReviewError):
                return Answer(AnswerKind.UNKNOWN_REVIEW, self._unknown(review, reply.review_id, reply.voter),
                              reply.review_id)
            return review
        if reply.context:
            place = f"\0{reply.voter.channel}:{sorted(reply.context.items())!r}"
            here = found.get(place)
            if not isinstance(here, list):
                here = found[place] = self._store.open_reviews_posted_at(reply.voter.channel, reply.context)
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

    def _unknown(self, unknown: UnknownReviewError, review_id: str, voter: Identity) -> str:
        """"no review X", offering close ids only among the reviews ``voter`` may answer.

        The store's own hint names any close id; handed to whoever typed a
        wrong id, it would tell outsiders which reviews exist. The store's
        candidates cost an O(1) look-up each; only the few closest are read
        and checked against their reviewers (a check may ask an API).
        """
        import difflib  # here: only a mistyped id needs it

        candidates = {candidate.casefold(): candidate for candidate in unknown.close}
        mine = []
        for key in difflib.get_close_matches(review_id.strip().casefold(), list(candidates), n=5, cutoff=0.6):
            try:
                review = self._store.get_review(candidates[key])
            except UnknownReviewError:
                continue
            where = _posted(review, voter.channel)
            if self._authorizer.refusal(review.policy.reviewers, voter.qualified, where) is None:
                mine.append(review.id)
        hint = did_you_mean(review_id, mine, n=3) or "; `status` lists the open reviews you may answer"
        return f"no review {review_id!r}{hint}"

    # -- casting -------------------------------------------------------------------

    def _cast(self, casts: dict[str, list[tuple[int, Vote, str | None]]]) -> dict[int, Answer | Exception]:
        """Cast every review's votes (one store call for the batch); publish the reviews they decided."""
        try:
            cast = self._store.cast_votes({review_id: [(vote, refusal) for _, vote, refusal in group]
                                           for review_id, group in casts.items()})
        except OSError as err:
            self._write_failure = f"votes could not be stored: {err}"
            raise
        answers: dict[int, Answer | Exception] = {}
        for review_id, group in casts.items():
            results = cast[review_id]
            if isinstance(results, Exception):
                if isinstance(results, OSError):
                    self._write_failure = f"votes on review {review_id} could not be stored: {results}"
                answers.update((index, results) for index, _, _ in group)
                continue
            self._write_failure = None
            for (index, vote, _), result in zip(group, results, strict=True):
                log.info("review %s: %s %s via %s: %s", review_id, vote.voter, vote.decision.name.lower(),
                         vote.source, result.message)
                answers[index] = Answer(_KINDS.get(result.kind, AnswerKind.COUNTED), result.message, review_id)
            if self._decisions is not None and any(result.outcome is not None for result in results):
                try:
                    self._decisions.publish(review_id)
                except Exception:  # the vote is recorded; the tick publishes it again
                    log.exception("review %s is decided but could not be applied now; the tick retries", review_id)
        return answers

    # -- status --------------------------------------------------------------------

    def _status(self, voter: Identity, review_id: str | None) -> str:
        reviews = self._store.open_reviews()
        if review_id:
            reviews = [r for r in reviews if r.id.casefold() == review_id.casefold()]
        mine = [r for r in reviews
                if self._authorizer.refusal(r.policy.reviewers, voter.qualified, _posted(r, voter.channel)) is None]
        if not mine:
            return "no open review is waiting for you" + (f" ({review_id} is not open)" if review_id else "")
        lines = [f"{len(mine)} open review(s) you may answer:"]
        for review in mine:
            lines.append(
                f"- {review.id} (loop {review.loop}, run {review.run_id}): "
                f"{len(review.approvals)} of {review.policy.approvals_required} approvals - `approve {review.id}`"
            )
        return "\n".join(lines)


def _saved_plan_problem(store: Store, run_id: str, changes: Any) -> str | None:
    """Why ``plan`` changes cannot apply to the run's plan as it paused (its snapshot), else None.

    The engine's own rule, asked while the run waits rather than when it
    resumes; a run with no readable snapshot is left to the engine, which
    asks the same rule then.
    """
    from loop_engine.engine_decisions import plan_changes_problem  # the engine loads only for a plan change

    try:
        state = store.load_state(run_id)
    except (StoreError, ValueError, OSError):
        return None
    if state is None or state.current_plan is None:
        return None
    return plan_changes_problem(state.current_plan, changes)


def _posts_on(review: Review, channel: str) -> list[dict[str, Any]]:
    """The message data of the review's posts on ``channel`` (a damaged post is none)."""
    posts = []
    for raw in review.posts:
        try:
            ref = MessageRef.from_dict(raw)
        except ValueError:
            continue
        if ref.channel == channel:
            posts.append(dict(ref.data))
    return posts


def _where(review: Review, reply: Reply) -> dict[str, Any]:
    """Where the answer was given, or else where the review was posted on the voter's channel."""
    if reply.context:
        return {**reply.context, "review_posts": _posts_on(review, reply.voter.channel)}
    return _posted(review, reply.voter.channel)


def _posted(review: Review, channel: str) -> dict[str, Any]:
    """Where ``review`` was posted on ``channel`` (its first message there), or {}; and all its posts there."""
    posts = _posts_on(review, channel)
    return {**(posts[0] if posts else {}), "review_posts": posts}


def _same_place(post: dict[str, Any], context: Any) -> bool:
    """Is this post where ``context`` points? (GitHub spells a repository in any case.)"""
    return bool(context) and all(str(post.get(key, "")).casefold() == str(value).casefold()
                                 for key, value in context.items())


def _written_before(review: Review, reply: Reply) -> bool:
    """Was this answer written before the review was posted where it was given (a GitHub comment or label)?

    A replayed delivery carries an old comment or label: an answer to an
    earlier review on the same issue, never to this one. (The webhook's
    intake already refuses a body it has seen; this holds for the votes
    themselves.) Comment ids grow with time, so an older comment has a
    smaller id than the review's own; a label stamped (in GitHub's whole
    seconds) before the second in which the review was posted is older.
    """
    comment_id, label_at = reply.respond.get("comment_id"), reply.respond.get("label_at")
    if comment_id is None and label_at is None:
        return False
    for post in _posts_on(review, reply.voter.channel):
        if not _same_place(post, reply.context):
            continue
        if isinstance(comment_id, int) and isinstance(post.get("comment_id"), int):
            return comment_id < post["comment_id"]
        if isinstance(label_at, str):
            posted = post.get("posted_at") or review.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return label_at < str(posted)
    return False
