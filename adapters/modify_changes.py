"""What does a modify change? Its ``key=value`` pairs or fenced block, read into the engine's changes.

Shared by every way a modify arrives: a Slack or GitHub command, the Slack
modal's fields and ``loopbot decide --set``. Changes the engine would refuse
are refused here, when the vote is cast: refused only when the run resumes,
they would leave a decided review that can never be applied.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import yaml

from .command_error import CommandError
from .vote_values import MAX_VALUE_BYTES, MAX_VALUE_DEPTH, TOO_DEEP, shorten, value_problem

__all__ = [
    "CONTEXT_SHORTHANDS",
    "FENCED_BLOCK",
    "parse_assignments",
    "parse_modify",
    "modification_problem",
]

#: Keys a modify may give without ``context.``: the run's context is where they go (daily-triage's
#: ``skip=#12,#15 label.#12=P1``). Any other bare key is refused, so a misspelt ``plna.skip`` is not taken.
CONTEXT_SHORTHANDS = ("skip", "label")
#: A fenced block inside a modify command's text.
FENCED_BLOCK = re.compile(
    r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[\w-]*)[ \t]*\n(?P<body>.*?)\n[ \t]*(?P=fence)", re.DOTALL
)
_MODIFY_USAGE = "usage: modify [review-id] context.KEY=VALUE ..."


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
    refused here, naming ``key``.
    """
    if len(text) > MAX_VALUE_BYTES:
        raise CommandError(f"{key}: the value is {len(text):,} characters; at most {MAX_VALUE_BYTES:,} are stored")
    try:
        value = json.loads(text)
    except RecursionError:
        raise CommandError(f"{key}: {TOO_DEEP}") from None
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
            raise CommandError(f'modify expects key=value, got "{shorten(token)}"\n{_MODIFY_USAGE}')
        if len(parts) > MAX_VALUE_DEPTH // 2:
            raise CommandError(f'{shorten(key.strip())}: at most {MAX_VALUE_DEPTH // 2} dotted parts in a key')
        path = f"context.{key.strip()}" if parts[0] in CONTEXT_SHORTHANDS else key.strip()
        _set_path(result, path, _scalar(value, key.strip(), len(parts)))
    problem = value_problem(result)
    if problem is not None:  # each value fits, all of them together may not
        raise CommandError(problem)
    return result


def modification_problem(modifications: dict[str, Any]) -> str | None:
    """Why the engine would refuse these MODIFY changes, else None."""
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
        raise CommandError(f"modify: the fenced block is {TOO_DEEP}") from None
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


def parse_modify(rest: str) -> dict[str, Any]:
    """The changes of a modify command's text: ``key=value`` pairs or one fenced JSON/YAML block."""
    block = FENCED_BLOCK.search(rest)
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
