"""The command grammar, table by table."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.command_error import CommandError
from adapters.commands import HELP_TEXT, Command, decision_from_word, parse_command, parse_comment
from adapters.modify_changes import modification_problem, parse_assignments
from loop_engine.checkpoint import HumanDecision

A, R, T, M, P = (HumanDecision.APPROVE, HumanDecision.REJECT, HumanDecision.RETRY,
                 HumanDecision.MODIFY, HumanDecision.PAUSE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("approve", Command(A)),
        ("APPROVE triage-17", Command(A, "triage-17")),
        ("lgtm triage-17 ship it", Command(A, "triage-17", "ship it")),
        ("Yes", Command(A)),
        ("approve looks fine", Command(A, None, "looks fine")),
        ("/approve triage-17", Command(A, "triage-17")),
        ("<@U0BOT> approve", Command(A)),
        ("<@U0BOT|loopbot> lgtm nice", Command(A, None, "nice")),
        ("reject triage-17 labels are wrong", Command(R, "triage-17", "labels are wrong")),
        ("deny too risky", Command(R, None, "too risky")),
        ("No nope", Command(R, None, "nope")),
        ("retry", Command(T)),
        ("retry demo-3 use the cache", Command(T, "demo-3", "use the cache")),
        ("modify demo-3 context.items=5", Command(M, "demo-3", "context.items=5", {"context": {"items": 5}})),
        ("modify context.a=x context.b=true",
         Command(M, None, "context.a=x context.b=true", {"context": {"a": "x", "b": True}})),
        ("modify context.repo=octo/ops", Command(M, None, "context.repo=octo/ops", {"context": {"repo": "octo/ops"}})),
        ('modify context.note="two words"',
         Command(M, None, 'context.note="two words"', {"context": {"note": "two words"}})),
        ("""modify step.description="smaller" plan.skip='["s2"]'""",
         Command(M, None, """step.description="smaller" plan.skip='["s2"]'""",
                 {"step": {"description": "smaller"}, "plan": {"skip": ["s2"]}})),
        ('modify x-1 ```json\n{"context": {"items": 2}}\n```',
         Command(M, "x-1", '```json\n{"context": {"items": 2}}\n```', {"context": {"items": 2}})),
        ("modify\n```yaml\ncontext:\n  labels: [a, b]\n```",
         Command(M, None, "```yaml\ncontext:\n  labels: [a, b]\n```", {"context": {"labels": ["a", "b"]}})),
        ("pause", Command(P)),
        ("pause triage-17 2h", Command(P, "triage-17", "2h", pause_for=timedelta(hours=2))),
        ("PAUSE 1d", Command(P, None, "1d", pause_for=timedelta(days=1))),
        ("pause 1h30m", Command(P, None, "1h30m", pause_for=timedelta(hours=1, minutes=30))),
        ("status", Command("status")),
        ("status Triage-17", Command("status", "Triage-17")),
        ("help", Command("help")),
        ("", Command("help")),
        ("   ", Command("help")),
    ],
)
def test_parse_command(text: str, expected: Command) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("aprove triage-17", 'unknown command "aprove" - did you mean "approve"?'),
        ("rejct x", 'unknown command "rejct" - did you mean "reject"?'),
        ("frobnicate", 'unknown command "frobnicate"\n'),
        ("reject", "reject needs a reason"),
        ("reject triage-17", "reject needs a reason"),
        ("deny", "deny needs a reason"),
        ("modify", "modify needs at least one key=value"),
        ("modify triage-17", "modify needs at least one key=value"),
        ("modify items", 'modify expects key=value, got "items"'),
        ("modify =3", 'modify expects key=value, got "=3"'),
        ("modify a..b=3", 'modify expects key=value, got "a..b=3"'),
        ("modify context=1 context.b=2", 'conflicts with an earlier value for "context"'),
        ("modify note=x", "modify cannot change 'note': changes go under context, plan, step"),
        ("modify note=x", "e.g. context.note=VALUE"),
        ("modify note=x", "usage: modify [review-id] context.KEY=VALUE"),
        ("modify context.a=1 items=2", "modify cannot change 'items'"),
        ("modify context=5", "context takes keys under it (e.g. context.KEY=VALUE)"),
        ("modify ```json\n{\"items\": 2}\n```", "modify cannot change 'items'"),
        ('modify note="open', "check the quotes"),
        ("modify ```json\n[1]\n```", "must hold a mapping"),
        ("modify ```json\n{oops\n```", "not valid JSON"),
        ("modify ```yaml\na: [\n```", "not valid YAML"),
        ("modify a=1 ```json\n{}\n```", "not both"),
        ("pause later", "pause: invalid duration 'later'"),
        ("pause 0h", "longer than zero"),
        ("pause 30m1h", 'largest first'),
        ("pause 3000000d", "pause: duration '3000000d' is too long: the longest allowed is 366d"),
        ("pause 99999999999d", "usage: pause [review-id] [duration]"),
        ("status everything please", "status takes at most a review id"),
        ("!!", '"!!" is not a command'),
    ],
)
def test_parse_command_errors(text: str, message: str) -> None:
    result = parse_command(text)
    assert isinstance(result, CommandError)
    assert message in str(result)


def test_unknown_verb_error_carries_usage() -> None:
    result = parse_command("aprove")
    assert isinstance(result, CommandError)
    assert HELP_TEXT in str(result)


def test_help_lists_every_verb_and_alias() -> None:
    for word in ("approve", "lgtm", "yes", "reject", "deny", "no", "retry", "modify", "pause", "status", "help"):
        assert word in HELP_TEXT


@pytest.mark.parametrize(
    ("word", "decision"),
    [("approve", A), ("LGTM", A), ("yes", A), ("reject", R), ("Deny", R), ("no", R),
     ("retry", T), ("modify", M), (" pause ", P)],
)
def test_decision_from_word(word: str, decision: HumanDecision) -> None:
    assert decision_from_word(word) is decision


@pytest.mark.parametrize(
    ("word", "message"),
    [("aprove", 'unknown decision "aprove" - did you mean "approve"?'),
     ("rejekt", 'did you mean "reject"?'),
     ("status", 'unknown decision "status"'),
     ("help", 'unknown decision "help"'),
     ("xyzzy", 'unknown decision "xyzzy"\n')],
)
def test_decision_from_word_errors(word: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        decision_from_word(word)
    assert message in str(info.value)


def test_modification_problem_names_the_engine_keys() -> None:
    assert modification_problem({"context": {"a": 1}, "plan": {"skip": ["s"]}, "step": {"output": 1}}) is None
    assert "context, plan, step" in (modification_problem({"note": "x"}) or "")
    assert "at least one change" in (modification_problem({}) or "")


def test_help_shows_modify_with_a_key_the_engine_takes() -> None:
    assert "modify [review-id] context.KEY=VALUE" in HELP_TEXT


def test_parse_assignments_for_cli_set() -> None:
    assert parse_assignments(["items=3", "context.tag=x", "plan.skip=[\"s1\"]"]) == {
        "items": 3, "context": {"tag": "x"}, "plan": {"skip": ["s1"]},
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/approve", [Command(A)]),
        ("Looks good to me.\n\n/LGTM ship it\n", [Command(A, None, "ship it")]),
        ("/approve triage-17\r\nthanks", [Command(A, "triage-17")]),
        ("  /retry with more context", [Command(T, None, "with more context")]),
        ("/reject wrong labels", [Command(R, None, "wrong labels")]),
        ("/pause 2h", [Command(P, None, "2h", pause_for=timedelta(hours=2))]),
        ("/status", [Command("status")]),
        ("/approve\n/lgtm", [Command(A)]),
        ("/status\n/approve", [Command("status"), Command(A)]),
        (
            "/modify context.items=2 context.tag=x",
            [Command(M, None, "context.items=2 context.tag=x", {"context": {"items": 2, "tag": "x"}})],
        ),
        ("/modify\n\n```json\n{\"context\": {\"items\": 2}}\n```\n",
         [Command(M, None, "```json\n{\"context\": {\"items\": 2}}\n```", {"context": {"items": 2}})]),
        ("/modify demo-1\n```yaml\ncontext: {items: 4}\n```",
         [Command(M, "demo-1", "```yaml\ncontext: {items: 4}\n```", {"context": {"items": 4}})]),
        # never commands: prose, quotes, fenced code, HTML comments, indented code, paths
        ("I will /approve later", []),
        ("> /approve\n> quoted from above", []),
        ("```\n/approve\n```", []),
        ("~~~~\n/reject no\n```\n/reject still code\n~~~~", []),
        ("<!-- /approve -->", []),
        ("<!--\n/approve\n-->\nplain text", []),
        ("<!-- loopbot:review=demo-1 -->\n# Human Checkpoint", []),
        ("    /approve", []),
        ("/usr/bin/env is a path", []),
        ("", []),
        ("```\ncode\n```\n/approve after the block", [Command(A, None, "after the block")]),
    ],
)
def test_parse_comment(body: str, expected: list[Command]) -> None:
    assert parse_comment(body) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("/approve\n/reject no way", "contradictory decisions (/approve and /reject)"),
        ("/retry\n/pause", "contradictory decisions (/pause and /retry)"),
        ("/aprove", 'did you mean "approve"?'),
        ("/reject", "reject needs a reason"),
        ("/modify", "modify needs at least one key=value"),
        ("/modify note=ok", "modify cannot change 'note'"),
    ],
)
def test_parse_comment_errors(body: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse_comment(body)
    assert message in str(info.value)


def test_pause_takes_the_shared_duration_grammar() -> None:
    for text, seconds in (("90s", 90), ("30m", 1800), ("1h30m", 5400), ("1d2h3m4s", 93784)):
        command = parse_command(f"pause {text}")
        assert isinstance(command, Command)
        assert command.pause_for is not None and command.pause_for.total_seconds() == seconds
    for text in ("30m1h", "0m", "1x", "h"):
        error = parse_command(f"pause {text}")
        assert isinstance(error, CommandError) and "usage: pause" in str(error)


def test_pause_help_names_the_longest_pause() -> None:
    assert "at most 366d" in HELP_TEXT
    assert isinstance(parse_command("pause 366d"), Command)
    assert isinstance(parse_command("pause 367d"), CommandError)
