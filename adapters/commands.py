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
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

import yaml

from loop_engine.review import HumanDecision  # not .checkpoint: that loads persistence (orjson)

from .durations import parse_duration
from .suggest import did_you_mean

__all__ = [
    "CONTEXT_SHORTHANDS",
    "Command",
    "CommandError",
    "Verb",
    "VerbSpec",
    "VERBS",
    "HELP_TEXT",
    "parse_command",
    "parse_comment",
    "parse_assignments",
    "modification_problem",
    "value_problem",
    "identity_problem",
    "MAX_VALUE_DEPTH",
    "MAX_VALUE_BYTES",
    "MAX_IDENTITY_LENGTH",
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

# --- Limits on what a vote may carry ------------------------------------------
#: A vote's changes are stored in the review, then in the run's snapshots, a few
#: levels further down: orjson refuses more than 255 levels and the stdlib
#: decoder runs out of stack near 1,000, so the limit sits far below both.
MAX_VALUE_DEPTH = 32
#: Changes are stored in every snapshot of the run from then on.
MAX_VALUE_BYTES = 64 * 1024
#: Voter names are printed in replies, status and logs.
MAX_IDENTITY_LENGTH = 100
#: Integers a JSON reader keeps exact (the engine's own rule, loop_engine.jsonvalue).
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
#: Characters that would let a name forge lines or reorder text in output and logs:
#: C0 and C1 controls (newlines included), DEL, Unicode line/paragraph separators
#: and bidirectional overrides.
_CONTROL_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")

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
#: A fenced block inside a modify command's text.
_FENCED_BLOCK = re.compile(
    r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[\w-]*)[ \t]*\n(?P<body>.*?)\n[ \t]*(?P=fence)", re.DOTALL
)


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

_MODIFY_USAGE = "usage: modify [review-id] context.KEY=VALUE ..."
#: Keys a modify may give without ``context.``: the run's context is where they go (daily-triage's
#: ``skip=#12,#15 label.#12=P1``). Any other bare key is refused, so a misspelt ``plna.skip`` is not taken.
CONTEXT_SHORTHANDS = ("skip", "label")
_BY_NAME: dict[str, VerbSpec] = {name: spec for spec in VERBS for name in spec.names}
_DECISION_NAMES = [name for spec in VERBS if isinstance(spec.verb, HumanDecision) for name in spec.names]


class CommandError(ValueError):
    """Text that was meant as a command but is not a valid one; the message is the reply."""


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
            raise CommandError(f'loops takes nothing after it, not "{_shorten(rest)}"\nusage: {usage}')
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


def _set_path(target: dict[str, Any], key: str, value: Any) -> None:
    """``context.limit=5`` -> ``{"context": {"limit": 5}}``: dotted keys nest."""
    *parents, leaf = key.split(".")
    node = target
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise CommandError(f'modify: "{key}" conflicts with an earlier value for "{part}"')
        node = child
    node[leaf] = value


def _scalar(text: str, key: str = "value", depth: int = 0) -> Any:
    """JSON values stay typed (``5``, ``true``, ``["a"]``); anything else is a string.

    A value that could not be stored and read back as it is (NaN, 1e999,
    nesting deeper than ``MAX_VALUE_DEPTH``, more than ``MAX_VALUE_BYTES``) is
    refused here, naming ``key``: accepted, it would break the review or the
    run long after the person who sent it has gone.
    """
    if len(text) > MAX_VALUE_BYTES:
        raise CommandError(f"{key}: the value is {len(text):,} characters; at most {MAX_VALUE_BYTES:,} are stored")
    try:
        value = json.loads(text)
    except RecursionError:
        raise CommandError(f"{key}: {_too_deep()}") from None
    except ValueError:
        value = text
    problem = value_problem(value, key, depth=depth)
    if problem is not None:
        raise CommandError(problem)
    return value


def parse_assignments(tokens: list[str]) -> dict[str, Any]:
    """``["a=1", "context.repo=octo/ops"]`` -> a nested dict; shared with ``loopbot decide --set``."""
    result: dict[str, Any] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        parts = key.strip().split(".")
        if not sep or not key.strip() or any(not part for part in parts):
            raise CommandError(f'modify expects key=value, got "{_shorten(token)}"\n{_MODIFY_USAGE}')
        if len(parts) > MAX_VALUE_DEPTH // 2:
            raise CommandError(f'{_shorten(key.strip())}: at most {MAX_VALUE_DEPTH // 2} dotted parts in a key')
        path = f"context.{key.strip()}" if parts[0] in CONTEXT_SHORTHANDS else key.strip()
        _set_path(result, path, _scalar(value, key.strip(), len(parts)))
    problem = value_problem(result)
    if problem is not None:  # each value fits, all of them together may not
        raise CommandError(problem)
    return result


def _too_deep() -> str:
    return f"nested more than {MAX_VALUE_DEPTH} levels deep; store a flatter value"


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def value_problem(value: Any, where: str = "", *, depth: int = 0) -> str | None:
    """Why ``value`` would not come back from the store as it went in, else None.

    ``where`` is the dotted key that holds ``value`` ("" for a vote's whole
    changes) and ``depth`` how deep that key already sits; messages name the
    key where the problem is.

    The engine refuses such a value only when the run resumes, and a stored
    review too deep to decode breaks every tick; so votes are checked when
    cast. Walks without recursion and stops once ``MAX_VALUE_BYTES`` worth
    of the value has been seen, so neither deep nesting nor a YAML alias
    bomb (shared lists, expanded on every visit) can make the check itself
    expensive. ``depth`` is how deep ``value`` already sits.
    """
    budget = MAX_VALUE_BYTES
    too_big = f"{where or 'the changes'}: larger than {MAX_VALUE_BYTES // 1024} KiB; store a smaller value"
    stack: list[tuple[Any, int, str]] = [(value, depth, where)]
    while stack:
        item, level, path = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if level >= MAX_VALUE_DEPTH:
                return f"{_shorten(path.split('[', 1)[0] or 'the changes')}: {_too_deep()}"
            budget -= 2
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return f"{_shorten(path or 'the changes')}: key {key!r} is not text; JSON keys are text"
                    budget -= len(key) + 4
                    if budget < 0:
                        return too_big
                    if _bad_text(key):
                        return f"{_shorten(path or 'the changes')}: a key is not valid UTF-8 text"
                    stack.append((child, level + 1, f"{path}.{key}" if path else key))
            else:
                for index, child in enumerate(item):
                    budget -= 1
                    if budget < 0:
                        return too_big
                    stack.append((child, level + 1, f"{path}[{index}]"))
        elif kind is str:
            budget -= len(item) + 2
            if budget < 0:
                return too_big
            if _bad_text(item):
                return f"{_shorten(path)}: not valid UTF-8 text (check the terminal's or the file's encoding)"
        elif item is None or kind is bool:
            budget -= 5
        elif kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return f"{_shorten(path)}: the integer does not fit in 64 bits; quote it to store it as text"
            budget -= 20
        elif kind is float:
            if not math.isfinite(item):
                return (f"{_shorten(path)}: {item!r} is not a finite number and JSON cannot hold it; "
                        "store it as quoted text, or null")
            budget -= 24
        else:
            return (f"{_shorten(path)}: a {kind.__name__} is not a JSON value; use text, numbers, "
                    "true/false, null, lists and mappings (quote dates and times)")
        if budget < 0:
            return too_big
    return None


def _bad_text(text: str) -> bool:
    """A lone surrogate (from argv or a file that is not UTF-8) cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def identity_problem(name: str) -> str | None:
    """Why ``name`` cannot be a voter's name, else None.

    Names are echoed in replies, ``status`` and the log: a newline, a
    terminal escape or a bidi override in one could forge lines there, and
    leading or trailing spaces make a name that looks like another.
    """
    if not name or not name.strip():
        return "a voter name cannot be empty"
    if len(name) > MAX_IDENTITY_LENGTH:
        return f"a voter name has at most {MAX_IDENTITY_LENGTH} characters, not {len(name):,}"
    if _bad_text(name):
        return "a voter name must be valid UTF-8 text (check the terminal's encoding)"
    control = _CONTROL_CHARS.search(name)
    if control is not None:
        return (f"a voter name cannot hold control characters or line breaks "
                f"({control.group()!r} at position {control.start() + 1})")
    if name != name.strip():
        return "a voter name cannot start or end with a space"
    return None


def modification_problem(modifications: dict[str, Any]) -> str | None:
    """Why the engine would refuse these MODIFY changes, else None.

    Checked when the vote is cast: a change the engine refuses only when the
    run resumes would leave a decided review that can never be applied.
    """
    if not modifications:
        return "modify needs at least one change, e.g. context.KEY=VALUE"
    # here: the engine's rules load the engine (asyncio, jsonschema), which parsing a command never needs
    from loop_engine.engine_decisions import MODIFY_KEYS, modifications_problem

    unknown = sorted(set(modifications) - set(MODIFY_KEYS))
    if unknown:
        return (
            f"modify cannot change {', '.join(repr(k) for k in unknown)}: changes go under "
            f"{', '.join(MODIFY_KEYS)} - e.g. context.{unknown[0]}=VALUE (merged into the run's context), "
            """step.description="..." or plan.skip='["step-id"]'"""
        )
    flat = [key for key in MODIFY_KEYS if key in modifications and not isinstance(modifications[key], dict)]
    if flat:
        return f"modify: {flat[0]} takes keys under it (e.g. {flat[0]}.KEY=VALUE), not a single value"
    problem = value_problem(modifications)
    if problem is not None:
        return f"modify: {problem}"
    problem = modifications_problem(modifications)  # the engine's own rules for what is under each key
    return None if problem is None else f"modify: {problem}"


def _parse_block(info: str, body: str) -> dict[str, Any]:
    kind = "JSON" if info.lower() == "json" else "YAML"
    if len(body) > MAX_VALUE_BYTES:
        raise CommandError(
            f"modify: the fenced block is {len(body):,} characters; at most {MAX_VALUE_BYTES:,} are stored"
        )
    try:
        data = json.loads(body) if kind == "JSON" else yaml.safe_load(body)
    except RecursionError:
        raise CommandError(f"modify: the fenced block is {_too_deep()}") from None
    except (ValueError, yaml.YAMLError) as exc:
        raise CommandError(f"modify: the fenced block is not valid {kind}: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise CommandError("modify: the fenced block must hold a mapping of keys to new values")
    result = {str(key): value for key, value in data.items() if str(key) not in CONTEXT_SHORTHANDS}
    short = {str(key): value for key, value in data.items() if str(key) in CONTEXT_SHORTHANDS}
    if short:
        context = result.get("context", {})
        if not isinstance(context, dict):
            raise CommandError(f'modify: {", ".join(short)} go into context, which the block gives as one value')
        result["context"] = {**context, **short}
    return result


def _parse_modify(rest: str) -> dict[str, Any]:
    block = _FENCED_BLOCK.search(rest)
    if block:
        if rest[: block.start()].strip() or rest[block.end():].strip():
            raise CommandError("modify: give either key=value pairs or one fenced block, not both")
        modifications = _parse_block(block.group("info"), block.group("body"))
    else:
        try:
            tokens = shlex.split(rest)
        except ValueError as exc:
            raise CommandError(f"modify: {exc} (check the quotes)") from None
        if not tokens:
            raise CommandError(f"modify needs at least one key=value (or a fenced ```json block)\n{_MODIFY_USAGE}")
        modifications = parse_assignments(tokens)
    problem = modification_problem(modifications)
    if problem is not None:
        raise CommandError(f"{problem}\n{_MODIFY_USAGE}")
    return modifications


def _build(verb_word: str, rest: str) -> Command:
    spec = _BY_NAME.get(verb_word.lower())
    if spec is None:
        raise _unknown(verb_word, list(_BY_NAME), "command")
    rest = rest.strip()
    if len(rest) > MAX_VALUE_BYTES:  # the text is stored as the vote's feedback, in every later snapshot
        raise CommandError(f"{verb_word.lower()}: the text is {len(rest):,} characters; at most {MAX_VALUE_BYTES:,}")
    if _bad_text(rest):
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
        return Command(verb, review_id, rest, _parse_modify(rest))
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
    block = _FENCED_BLOCK.match(text)
    return block.group(0) if block else ""


def parse_comment(body: str) -> list[Command]:
    """Every command in a GitHub comment; [] when it holds none.

    Raises CommandError for an invalid command line or for decisions that
    contradict each other (approve and reject in one comment): acting on
    either would guess, ignoring both would be silence.
    """
    commands: list[Command] = []
    for verb, rest, after in _command_lines(body):
        if verb.lower() == "modify" and not _FENCED_BLOCK.search(rest) and "=" not in rest:
            rest = f"{rest}\n{_following_block(after)}".strip()
        command = _build(verb, rest)
        if command not in commands:
            commands.append(command)
    decisions = sorted({c.decision.name.lower() for c in commands if c.decision is not None})
    if len(decisions) > 1:
        listed = " and ".join(f"/{name}" for name in decisions)
        raise CommandError(f"this comment holds contradictory decisions ({listed}); post one decision per comment")
    return commands
