"""What does this text ask for? The one command grammar of Slack, GitHub and the CLI.

The grammar (as people meet it: docs/slack.md, docs/github.md, docs/commands.md) is case-insensitive:

    approve [note]           aliases lgtm, yes
    reject <reason>          aliases deny, no; the reason is required
    retry [hint]
    modify key=value ...     or a fenced ```json / ```yaml block; the keys the
                             engine takes: context.KEY, plan.skip / plan.add,
                             step.description / step.metadata / step.output;
                             ``skip=`` and ``label.KEY=`` are short for
                             ``context.skip=`` and ``context.label.KEY=``
    pause [duration]         e.g. 2h, 1d
    status
    help
    run <loop>               start a run (Slack and the CLI; not a GitHub comment)
    cancel [run-id] [reason] stop a run (on GitHub, the run of the issue's review)
    loops                    each loop's schedule, next run and last outcome

Slack sends ``<verb> [review-id] ...`` (a slash command's text or an
@-mention); GitHub comments carry lines that start with ``/<verb>``. A
review id looks like ``<loop>-<n>`` and is optional where the context (a
Slack thread, a GitHub issue) already names the review. Everything that is
not a valid command comes back as a ``CommandError`` whose message says what
was wrong and what would work - never silence.

What a modify changes is read by ``adapters.modify_changes``; how large and
how deep a vote's values may be, and what a voter's name may hold, is
``adapters.vote_values``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from loop_engine.review import HumanDecision  # not .checkpoint: that loads persistence (orjson)

from .command_error import CommandError
from .durations import parse_duration
from .modify_changes import FENCED_BLOCK, parse_modify
from .suggest import did_you_mean
from .vote_values import MAX_VALUE_BYTES, not_utf8, shorten

__all__ = [
    "Command",
    "Verb",
    "VerbSpec",
    "VERBS",
    "HELP_TEXT",
    "parse_command",
    "parse_comment",
    "decision_from_word",
    "looks_like_review_id",
    "looks_like_run_id",
    "CONTROL_VERBS",
]

Verb = HumanDecision | Literal["status", "help", "run", "cancel", "loops"]
#: The verbs that drive runs rather than vote on a review (``bot.desk.control`` answers them).
CONTROL_VERBS = ("run", "cancel", "loops")
#: The words ``Command.from_dict`` reads back as they are.
_WORD_VERBS = ("status", "help", *CONTROL_VERBS)

# --- Anchored patterns -------------------------------------------------------
#: One command: an optional leading "/", the verb, then the rest.
_COMMAND = re.compile(r"\A/?(?P<verb>[A-Za-z][\w-]*)(?:\s+(?P<rest>.*))?\Z", re.DOTALL)
#: A GitHub comment line that is a command: "/verb ..." at the start of a line
#: (at most 3 spaces of indent: 4 make a Markdown code block).
_COMMENT_LINE = re.compile(r"\A {0,3}/(?P<verb>[A-Za-z][\w-]*)(?:[ \t]+(?P<rest>.*))?\Z")
#: A review id: "<loop>-<n>", e.g. "triage-17".
_REVIEW_ID = re.compile(r"\A[a-z0-9](?:[a-z0-9_-]*[a-z0-9_])?-\d+\Z", re.IGNORECASE)
#: A run id looks like "<loop>-run-<n>", e.g. "triage-run-3".
_RUN_ID = re.compile(r"\A[a-z0-9](?:[a-z0-9_-]*[a-z0-9_])?-run-\d+\Z", re.IGNORECASE)
#: The first word of a command's rest, which may be a review id.
_FIRST_WORD = re.compile(r"\A(?P<word>\S+)\s*(?P<rest>.*)\Z", re.DOTALL)
#: Leading Slack mentions ("<@U0BOT> approve") are addressing, not words.
_SLACK_MENTION = re.compile(r"\A(?:\s*<@[A-Z0-9]+(?:\|[^>]*)?>)+\s*")
#: Fenced code (``` or ~~~), block quotes and HTML comments are never commands.
_FENCE = re.compile(r"\A {0,3}(?P<fence>`{3,}|~{3,})\s*(?P<info>[\w-]*)")
_QUOTE = re.compile(r"\A {0,3}>")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True)
class VerbSpec:
    """One verb of the grammar: what it decides, the words that name it, and its help line."""

    verb: Verb
    names: tuple[str, ...]
    usage: str
    help: str


# --- The verbs, with the help text beside them ----------------------------------
VERBS: tuple[VerbSpec, ...] = (
    VerbSpec(HumanDecision.APPROVE, ("approve", "lgtm", "yes"), "approve [review-id] [note]",
             "approve the proposed action (aliases: lgtm, yes)"),
    VerbSpec(HumanDecision.REJECT, ("reject", "deny", "no"), "reject [review-id] <reason>",
             "reject it and end the run; a reason is required (aliases: deny, no)"),
    VerbSpec(HumanDecision.RETRY, ("retry",), "retry [review-id] [hint]",
             "run the step again, optionally with a hint"),
    VerbSpec(HumanDecision.MODIFY, ("modify",), "modify [review-id] context.KEY=VALUE ...",
             "change the run, then continue: context.KEY=VALUE, step.description=..., plan.skip=[...] "
             "(or one fenced ```json / ```yaml block)"),
    VerbSpec(HumanDecision.PAUSE, ("pause",), "pause [review-id] [duration]",
             "keep it waiting and silence reminders for a while, e.g. 2h or 1d (default 24h, at most 366d)"),
    VerbSpec("status", ("status",), "status [review-id]", "show open reviews and runs"),
    VerbSpec("run", ("run",), "run <loop>", "start a run of the loop now (its operators only)"),
    VerbSpec("cancel", ("cancel",), "cancel [run-id] [reason]",
             "stop the run: a waiting one at once, a running one at its next step (its operators only)"),
    VerbSpec("loops", ("loops",), "loops", "each loop's schedule, next run and last outcome"),
    VerbSpec("help", ("help",), "help", "show this help"),
)

HELP_TEXT = (
    "Commands (case-insensitive):\n"
    + "\n".join(f"  {spec.usage:<36} {spec.help}" for spec in VERBS)
    + "\nIn Slack: /loopbot <command> <review-id> ..., or @loopbot <command> in the review's thread."
    + "\nOn GitHub: a comment line starting with /<command>, e.g. /approve."
)

_BY_NAME: dict[str, VerbSpec] = {name: spec for spec in VERBS for name in spec.names}
_DECISION_NAMES = [name for spec in VERBS if isinstance(spec.verb, HumanDecision) for name in spec.names]


@dataclass(frozen=True)
class Command:
    """One parsed command.

    ``argument`` is the free text after the verb (the note, reason or hint;
    for ``pause`` the duration as written) and doubles as the vote's feedback.
    """

    verb: Verb
    review_id: str | None = None
    argument: str = ""
    modifications: dict[str, Any] = field(default_factory=dict)
    pause_for: timedelta | None = None
    #: ``run``: the loop to start; ``cancel``: the run named (None: the run of the review posted here).
    target: str | None = None

    @property
    def feedback(self) -> str:
        return self.argument

    @property
    def decision(self) -> HumanDecision | None:
        """The decision this command votes for, or None for status/help and the run controls."""
        return self.verb if isinstance(self.verb, HumanDecision) else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a vote that waits in a queue before it is cast (a webhook's work)."""
        verb = self.verb.name.lower() if isinstance(self.verb, HumanDecision) else self.verb
        pause = None if self.pause_for is None else self.pause_for.total_seconds()
        return {"verb": verb, "review_id": self.review_id, "argument": self.argument,
                "modifications": dict(self.modifications), "pause_for": pause, "target": self.target}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Command:
        verb: Verb = raw["verb"] if raw["verb"] in _WORD_VERBS else HumanDecision[raw["verb"].upper()]
        pause = raw.get("pause_for")
        return cls(verb, raw.get("review_id"), raw.get("argument", ""), dict(raw.get("modifications") or {}),
                   None if pause is None else timedelta(seconds=pause), raw.get("target"))


def looks_like_review_id(word: str) -> bool:
    return bool(_REVIEW_ID.match(word))


def looks_like_run_id(word: str) -> bool:
    return bool(_RUN_ID.match(word))


def _control(verb: Verb, rest: str, usage: str) -> Command:
    """``run <loop>``, ``cancel [run-id] [reason]``, ``loops``: a target, not a review."""
    first = _FIRST_WORD.match(rest)
    if verb == "loops":
        if rest:
            raise CommandError(f'loops takes nothing after it, not "{shorten(rest)}"\nusage: {usage}')
        return Command("loops")
    if verb == "run":
        if first is None or first.group("rest").strip():
            raise CommandError(f"run needs one loop name, e.g. `run triage`\nusage: {usage}")
        return Command("run", target=first.group("word"))
    if first is not None and looks_like_run_id(first.group("word")):
        return Command("cancel", argument=first.group("rest").strip(), target=first.group("word"))
    return Command("cancel", argument=rest)


def _unknown(word: str, choices: list[str], what: str) -> CommandError:
    return CommandError(f'unknown {what} "{word}"{did_you_mean(word, choices)}\n{HELP_TEXT}')


def decision_from_word(word: str) -> HumanDecision:
    """``approve`` / ``LGTM`` / ``deny`` ... -> HumanDecision; anything else -> CommandError with did-you-mean."""
    spec = _BY_NAME.get(word.strip().lower())
    if spec is None or not isinstance(spec.verb, HumanDecision):
        raise _unknown(word.strip(), _DECISION_NAMES, "decision")
    return spec.verb


def _parse_duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CommandError(f"pause: {exc}\nusage: pause [review-id] [duration]") from exc


def _build(verb_word: str, rest: str) -> Command:
    spec = _BY_NAME.get(verb_word.lower())
    if spec is None:
        raise _unknown(verb_word, list(_BY_NAME), "command")
    rest = rest.strip()
    if len(rest) > MAX_VALUE_BYTES:  # the text is stored as the vote's feedback, in every later snapshot
        raise CommandError(f"{verb_word.lower()}: the text is {len(rest):,} characters; at most {MAX_VALUE_BYTES:,}")
    if not_utf8(rest):
        raise CommandError(f"{verb_word.lower()}: the text is not valid UTF-8 (a lone surrogate); send it again")
    if spec.verb in CONTROL_VERBS:
        return _control(spec.verb, rest, spec.usage)
    review_id: str | None = None
    first = _FIRST_WORD.match(rest)
    if first and looks_like_review_id(first.group("word")):
        review_id, rest = first.group("word"), first.group("rest").strip()
    verb = spec.verb
    if verb == "help":
        return Command("help")
    if verb == "status":
        if rest:
            raise CommandError(f'status takes at most a review id, not "{rest}"\nusage: {spec.usage}')
        return Command("status", review_id)
    if verb is HumanDecision.REJECT and not rest:
        raise CommandError(f"{verb_word.lower()} needs a reason, so the run's log says why\nusage: {spec.usage}")
    if verb is HumanDecision.MODIFY:
        return Command(verb, review_id, rest, parse_modify(rest))
    if verb is HumanDecision.PAUSE:
        return Command(verb, review_id, rest, pause_for=_parse_duration(rest) if rest else None)
    return Command(verb, review_id, rest)


def parse_command(text: str) -> Command | CommandError:
    """Parse one command (a Slack command's text or @-mention); empty text asks for help.

    The error is returned, not raised, because every caller's next step is to
    reply with its message.
    """
    stripped = _SLACK_MENTION.sub("", text.strip(), count=1).strip()
    if not stripped:
        return Command("help")
    match = _COMMAND.match(stripped)
    if match is None:
        return CommandError(f'"{stripped.split()[0]}" is not a command\n{HELP_TEXT}')
    try:
        return _build(match.group("verb"), match.group("rest") or "")
    except CommandError as exc:
        return exc


def _command_lines(body: str) -> list[tuple[str, str, list[str]]]:
    """Each "/verb rest" line outside code, quotes and HTML comments, with the lines after it."""
    lines = _HTML_COMMENT.sub("", body.replace("\r\n", "\n")).split("\n")
    found: list[tuple[str, str, list[str]]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group("fence")[0] == fence[0] and len(opener.group("fence")) >= len(fence):
                fence = None
            continue
        if opener:
            fence = opener.group("fence")
            continue
        if _QUOTE.match(line):
            continue
        match = _COMMENT_LINE.match(line.rstrip())
        if match:
            found.append((match.group("verb"), match.group("rest") or "", lines[index + 1:]))
    return found


def _following_block(lines: list[str]) -> str:
    """The fenced block right after a bare ``/modify`` line (blank lines allowed before it)."""
    text = "\n".join(lines).lstrip("\n")
    block = FENCED_BLOCK.match(text)
    return block.group(0) if block else ""


def parse_comment(body: str) -> list[Command]:
    """Every command in a GitHub comment; [] when it holds none.

    Raises CommandError for an invalid command line or for decisions that
    contradict each other (approve and reject in one comment): acting on
    either would guess, ignoring both would be silence.
    """
    commands: list[Command] = []
    for verb, rest, after in _command_lines(body):
        if verb.lower() == "modify" and not FENCED_BLOCK.search(rest) and "=" not in rest:
            rest = f"{rest}\n{_following_block(after)}".strip()
        command = _build(verb, rest)
        if command not in commands:
            commands.append(command)
    decisions = sorted({c.decision.name.lower() for c in commands if c.decision is not None})
    if len(decisions) > 1:
        listed = " and ".join(f"/{name}" for name in decisions)
        raise CommandError(f"this comment holds contradictory decisions ({listed}); post one decision per comment")
    return commands
