"""Hostile vote values are refused when cast, naming the key (issue #12 items 1-2), and hostile voter names."""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import pytest

from adapters.command_error import CommandError
from adapters.commands import parse_command
from adapters.modify_changes import modification_problem, parse_assignments
from adapters.vote_values import (
    MAX_IDENTITY_LENGTH,
    MAX_VALUE_BYTES,
    MAX_VALUE_DEPTH,
    identity_problem,
    value_problem,
)
from loop_engine.jsonvalue import check_json


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def refused(token: str) -> str:
    with pytest.raises(CommandError) as caught:
        parse_assignments([token])
    return str(caught.value)


@pytest.mark.parametrize("depth", [300, 982, 5_000, 50_000])
def test_deep_nesting_is_refused_with_the_key(depth: int) -> None:
    message = refused(f"context.x={nested(depth)}")
    assert message.startswith("context.x: ")
    assert "nested more than" in message or "characters" in message


def test_a_hundred_thousand_levels_cannot_raise_recursion_error() -> None:
    # longer than the size limit, and deep enough to blow the stack if it were decoded
    assert "at most" in refused(f"context.x={nested(100_000)}")
    # under the size limit but far past the decoder's stack: RecursionError becomes a CommandError
    assert "nested more than" in refused(f"context.x={'[' * 30_000}")


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "[1, NaN]", '{"a": Infinity}'])
def test_non_finite_numbers_are_refused(text: str) -> None:
    message = refused(f"context.x={text}")
    assert message.startswith("context.x") and "not a finite number" in message


def test_values_the_store_cannot_write_are_refused() -> None:
    assert "64 bits" in refused("context.x=99999999999999999999999")
    assert "UTF-8" in refused("context.x=\udcff")  # a byte that is not UTF-8, surrogate-escaped from argv
    assert "UTF-8" in refused('context.x="\\ud800"')  # a lone surrogate written as a JSON escape
    assert "characters" in refused("context.x=" + "a" * (MAX_VALUE_BYTES + 1))


def test_the_changes_together_are_limited_too() -> None:
    half = "x" * (MAX_VALUE_BYTES // 2)
    with pytest.raises(CommandError, match="larger than 64 KiB"):
        parse_assignments([f"context.a={half}", f"context.b={half}", f"context.c={half}"])


def test_too_many_dotted_parts_are_refused() -> None:
    assert "dotted parts" in refused(".".join(["context"] + ["a"] * 100) + "=1")


def test_the_deepest_value_accepted_survives_the_store_and_the_snapshot_encoder() -> None:
    deepest = nested(MAX_VALUE_DEPTH - 2)  # context.x already sits two levels down
    changes = parse_assignments([f"context.x={deepest}"])
    assert modification_problem(changes) is None
    # a review stores the changes some levels down, and a snapshot more again: far below both decoders' limits
    wrapped: Any = changes
    for _ in range(40):
        wrapped = {"wrap": wrapped}
    assert json.loads(json.dumps(wrapped)) == wrapped
    assert orjson.loads(orjson.dumps(wrapped)) == wrapped
    assert check_json(wrapped, "test") is wrapped
    assert "nested more than" in refused(f"context.x={nested(MAX_VALUE_DEPTH - 1)}")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("modify context.x=NaN", "context.x: nan is not a finite number"),
        ("modify ```json\n{\"context\": {\"x\": " + nested(40) + "}}\n```", "context.x: nested more than"),
        ("modify ```json\n{\"context\": " + nested(20_000) + "}\n```", "fenced block is nested more than"),
        ("modify ```yaml\ncontext: " + nested(5_000) + "\n```", "fenced block is nested more than"),
        ("modify ```yaml\ncontext: {x: .nan}\n```", "context.x: nan is not a finite number"),
        ("modify ```yaml\ncontext: {when: 2031-01-01}\n```", "context.when: a date is not a JSON value"),
        ("modify ```yaml\ncontext: {1: one}\n```", "key 1 is not text"),
        ("modify ```json\n\"" + "x" * (MAX_VALUE_BYTES + 1) + "\"\n```", "at most 65,536"),
    ],
)
def test_chat_modify_refuses_the_same_values(text: str, problem: str) -> None:
    result = parse_command(text)
    assert isinstance(result, CommandError), result
    assert problem in str(result)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("reject demo-1 caf\udce9", "reject: the text is not valid UTF-8"),
        ("approve " + "x" * (MAX_VALUE_BYTES + 1), "approve: the text is 65,537 characters"),
    ],
)
def test_a_note_the_store_could_not_write_is_refused(text: str, problem: str) -> None:
    result = parse_command(text)
    assert isinstance(result, CommandError) and problem in str(result)


def test_a_yaml_alias_bomb_in_a_modify_block_is_refused_fast() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    body = "\n".join(f"  {line}" for line in levels)  # 9**9 strings once expanded
    started = time.perf_counter()
    result = parse_command(f"modify\n```yaml\ncontext:\n{body}\n```")
    assert time.perf_counter() - started < 1.0
    assert isinstance(result, CommandError) and "larger than 64 KiB" in str(result)


def test_ordinary_values_still_pass() -> None:
    changes = parse_assignments(["context.n=1.5", "context.flags=[true, null]", 'context.o={"a": [1, "b"]}'])
    assert changes == {"context": {"n": 1.5, "flags": [True, None], "o": {"a": [1, "b"]}}}
    assert modification_problem(changes) is None
    assert value_problem({"text": "Jürgen ✓"}) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("alice\nINFO bot.runner: run demo-run-1 completed", "line breaks ('\\n' at position 6)"),
        ("alice\r", "control characters"),
        ("bob\x1b[2K", "control characters"),
        ("eve\x85", "control characters"),  # C1 next line
        ("mallory\u2028", "control characters"),
        ("a\u202eb", "control characters"),  # right-to-left override
        ("x" * (MAX_IDENTITY_LENGTH + 1), f"at most {MAX_IDENTITY_LENGTH} characters"),
        ("al\udcffice", "valid UTF-8"),
        (" alice", "start or end with a space"),
    ],
)
def test_identity_problem_refuses_names_that_could_forge_output(name: str, problem: str) -> None:
    found = identity_problem(name)
    assert found is not None and problem in found
    assert "\n" not in found and "\x1b" not in found  # the refusal itself cannot forge a line


@pytest.mark.parametrize("name", ["alice", "U0AAA", "octo/ops-team", "Jürgen Groß", "x" * MAX_IDENTITY_LENGTH])
def test_identity_problem_accepts_ordinary_names(name: str) -> None:
    assert identity_problem(name) is None
