"""``loopbot decide``: a vote from the command line, judged before the store is touched.

A line the grammar or the vote rules refuse is a usage error (exit 2) that
stores nothing; a vote the review refuses exits 1. Only the lock holder
applies a decided review, so this command only records the vote and says who
will apply it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from bot.cli_common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, decide_command, print_error, voter_name

if TYPE_CHECKING:  # pragma: no cover - typing only
    from bot.config_memo import ConfigView
    from loop_engine.review import HumanDecision

__all__ = ["cmd_decide"]


class _DecideTexts(NamedTuple):
    words: list[str]  #: every word `decide` takes, for a did-you-mean
    decisions: str  #: "decisions: approve (lgtm, yes), reject (deny, no), ..."
    usage: dict[HumanDecision | None, str]


@cache
def _decide_texts() -> _DecideTexts:
    """Built from the command grammar on first use, so that importing bot.cli does not load the grammar."""
    from adapters.commands import VERBS
    from loop_engine.review import HumanDecision

    specs = [spec for spec in VERBS if isinstance(spec.verb, HumanDecision)]
    return _DecideTexts(
        words=[name for spec in specs for name in spec.names],
        decisions="decisions: " + ", ".join(
            spec.names[0] + (f" ({', '.join(spec.names[1:])})" if spec.names[1:] else "") for spec in specs
        ),
        usage={
            None: "usage: loopbot decide REVIEW DECISION [DURATION] [--feedback TEXT] [--set KEY=VALUE ...] "
                  "[--as NAME]",
            HumanDecision.MODIFY: "usage: loopbot decide REVIEW modify --set context.KEY=VALUE ... "
                                  "(also plan.skip=[...], step.description=...) [--feedback TEXT]",
            HumanDecision.PAUSE: "usage: loopbot decide REVIEW pause [DURATION, e.g. 2h] "
                                 "[--set until=TIME-WITH-ZONE]",
        },
    )


def _changes(args: argparse.Namespace, decision: HumanDecision, now: datetime) -> dict[str, Any]:
    """The vote's changes from --set and DURATION; CommandError when they cannot go with ``decision``.

    Checked here, before the store is touched, so a bad line is a usage error
    that changes nothing.
    """
    from adapters.command_error import CommandError
    from adapters.durations import parse_duration
    from adapters.modify_changes import modification_problem, parse_assignments
    from loop_engine.review import HumanDecision

    changes = parse_assignments(args.assignments)
    if args.duration is not None:
        if decision is not HumanDecision.PAUSE:
            raise CommandError(
                f'unexpected "{args.duration}": only pause takes a duration (e.g. `pause 2h`); '
                "give a note or reason with --feedback TEXT"
            )
        if "until" in changes:
            raise CommandError("give pause a duration or --set until=TIME, not both")
        try:
            changes["until"] = (now + parse_duration(args.duration)).isoformat()
        except ValueError as err:
            raise CommandError(f"pause: {err}") from None
    if decision is HumanDecision.MODIFY:
        problem = modification_problem(changes)
        if problem is not None:
            raise CommandError(problem)
    else:  # the vote rules refuse these too; said here, they are usage errors (exit 2) like every bad line
        from bot.review_pause import pause_problem
        from bot.reviews import changes_problem

        problem = changes_problem(decision, changes) or (
            pause_problem(changes["until"], now) if decision is HumanDecision.PAUSE and "until" in changes else None
        )
        if problem is not None:
            raise CommandError(problem)
    return changes


def _loop_check(path: Path) -> Callable[[str, dict[str, Any]], str | None] | None:
    """The loops' own word on a MODIFY (``LoopCatalog.modification_problem``), as `serve` asks it.

    Only for modify: it loads the whole config and builds the loop. A config
    that cannot be loaded so leaves the check to the run's resume.
    """
    from bot.config import ConfigError, load_config
    from bot.loop_catalog import LoopCatalog

    try:
        catalog = LoopCatalog(load_config(path, need_secrets=False), config_dir=path.parent)
    except ConfigError:
        return None
    return catalog.modification_problem


def cmd_decide(args: argparse.Namespace, config: ConfigView, path: Path) -> int:
    from adapters.command_error import CommandError
    from adapters.commands import decision_from_word
    from adapters.suggest import did_you_mean
    from bot.store import UnknownReviewError
    from bot.store.open import open_store
    from bot.serve_lock import ROLE_SERVE, ServeLock, role_of
    from loop_engine.review import HumanDecision

    texts = _decide_texts()
    now = datetime.now(UTC)  # not bot.runner's utcnow: importing the runner loads the engine
    try:
        decision = decision_from_word(args.decision)
    except CommandError:  # its message is the chat help: say it in the CLI's words
        hint = did_you_mean(args.decision, texts.words)
        print_error(f'unknown decision "{args.decision}"{hint}\n{texts.usage[None]}\n{texts.decisions}')
        return EXIT_USAGE
    try:
        modifications = _changes(args, decision, now)
    except CommandError as err:
        print_error(f"{err}\n{texts.usage.get(decision, texts.usage[None])}")
        return EXIT_USAGE
    store = open_store(config)
    try:
        review = store.get_review(args.review)
    except UnknownReviewError as err:
        print_error(str(err))
        return EXIT_USAGE
    voter = voter_name(args.voter)
    if not voter:
        print_error("cannot tell who is voting: pass --as NAME or set LOOPBOT_USER")
        return EXIT_USAGE
    from adapters.channel import AnswerKind, Identity, Reply
    from adapters.commands import Command
    from bot.desk import Authorizer, ListMembership, People, VotePath

    people = People.from_config(config.people)
    authorizer = Authorizer({"local": ListMembership("local")}, people)
    allowed = authorizer.refusal(review.policy.reviewers, f"local:{voter}") is None
    if allowed and decision is HumanDecision.REJECT and not args.feedback.strip() and review.outcome is None:
        # the vote rules would refuse it too, but with the chat's syntax
        print_error(f"a reject needs a reason: {decide_command(path)} {review.id} reject "
                    '--feedback "the labels are wrong"')
        return EXIT_USAGE  # a missing argument, like modify without --set
    votes = VotePath(store, authorizer, clock=lambda: now, people=people,  # this process applies nothing
                     loop_check=_loop_check(path) if decision is HumanDecision.MODIFY else None)
    reply = Reply(Identity("local", voter, voter), Command(decision, review.id, args.feedback, modifications),
                  review_id=review.id, via="cli")
    answer = votes.handle(reply)
    if not answer.counted:
        print_error(answer.text)
        return EXIT_FAILED
    print(answer.text)
    if answer.kind is AnswerKind.DECIDED:
        holder = ServeLock.holder(config.state_dir)
        if holder and role_of(holder) == ROLE_SERVE:
            print(f"the running server (pid {holder.get('pid')}) resumes the run within a second")
        elif holder:
            print(f"a foreground `loopbot run` (pid {holder.get('pid')}) holds the state dir: "
                  "the run resumes when `loopbot serve` next starts")
        else:
            print("no server is running: `loopbot apply` resumes the run now (as `loopbot run` and "
                  "`loopbot serve` do when they start)")
    return EXIT_OK
