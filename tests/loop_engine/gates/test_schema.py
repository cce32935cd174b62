"""SchemaGate: real JSON Schema validation, every error path listed, bad schemas refused up front."""

from __future__ import annotations

from typing import Any

import pytest
import referencing

from loop_engine.errors import ConfigurationError
from loop_engine.gates import GateContext, SchemaGate

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_matching_output_passes() -> None:
    result = SchemaGate(PERSON).check(GateContext(output={"name": "Ada", "age": 36, "tags": ["x"]}))
    assert result.passed and result.details["errors"] == []


@pytest.mark.parametrize(
    ("output", "path"),
    [
        ({"name": "Ada", "age": "36"}, "/age"),  # a string where an integer belongs
        ({"name": "Ada", "age": True}, "/age"),  # a bool is not an integer
        ({"name": "Ada", "age": 3.5}, "/age"),
        ({"name": 7, "age": 1}, "/name"),
    ],
)
def test_wrong_types_fail(output: dict[str, Any], path: str) -> None:
    result = SchemaGate(PERSON).check(GateContext(output=output))
    assert not result.passed and result.blocks
    assert result.details["paths"] == [path]


def test_every_error_path_is_listed_in_order() -> None:
    output = {"name": "Ada", "age": -1, "email": "not-an-email", "tags": [1, "ok", 2], "extra": 1}
    result = SchemaGate(PERSON).check(GateContext(output=output))
    assert result.details["paths"] == ["", "/age", "/email", "/tags/0", "/tags/2"]
    validators = {e["path"]: e["validator"] for e in result.details["errors"]}
    assert validators == {"": "additionalProperties", "/age": "minimum", "/email": "format",
                          "/tags/0": "type", "/tags/2": "type"}
    assert result.message.startswith("5 schema error(s)")


def test_missing_required_and_wrong_root_type() -> None:
    assert "'age' is a required property" in SchemaGate(PERSON).check(GateContext(output={"name": "A"})).message
    assert not SchemaGate(PERSON).check(GateContext(output=["not", "an", "object"])).passed
    assert not SchemaGate(PERSON).check(GateContext(output=None)).passed


def test_text_is_validated_as_text_unless_parse_json() -> None:
    text = '{"name": "Ada", "age": 36}'
    assert not SchemaGate(PERSON).check(GateContext(output=text)).passed
    assert SchemaGate(PERSON, parse_json=True).check(GateContext(output=text)).passed
    bad = SchemaGate(PERSON, parse_json=True).check(GateContext(output='{"name": '))
    assert not bad.passed and "not JSON" in bad.message


def test_dialect_comes_from_dollar_schema() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "maximum": 5,
              "exclusiveMaximum": True}
    assert not SchemaGate(draft4).check(GateContext(output=5)).passed  # draft-04 boolean exclusiveMaximum
    assert SchemaGate(draft4).check(GateContext(output=4)).passed


def test_format_is_checked() -> None:
    gate = SchemaGate({"type": "string", "format": "date"})
    assert gate.check(GateContext(output="2024-02-29")).passed
    assert not gate.check(GateContext(output="2024-13-45")).passed


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "nope"}, "invalid Draft202012Validator schema at /type"),
        ({"pattern": "("}, "at /pattern"),
        ("{}", "got str"),
    ],
)
def test_invalid_schema_is_refused_at_construction(schema: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        SchemaGate(schema)


def test_unresolvable_refs_fail_without_network() -> None:
    remote = SchemaGate({"$ref": "https://example.invalid/schema.json"}).check(GateContext(output=1))
    assert not remote.passed and "never fetched" in remote.message
    local = SchemaGate({"$ref": "#/$defs/missing"}).check(GateContext(output=1))
    assert not local.passed


def test_refs_resolve_from_defs_and_a_given_registry() -> None:
    assert SchemaGate({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}).check(GateContext(output=1)).passed
    resource = referencing.Resource.from_contents(
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "string"}
    )
    registry: referencing.Registry[Any] = referencing.Registry().with_resource("urn:test:str", resource)
    gate = SchemaGate({"$ref": "urn:test:str"}, registry=registry)
    assert gate.check(GateContext(output="x")).passed
    assert not gate.check(GateContext(output=1)).passed


def test_boolean_schema_and_long_messages_truncated() -> None:
    assert SchemaGate(True).check(GateContext(output=object())).passed
    result = SchemaGate({"type": "integer"}).check(GateContext(output="x" * 10_000))
    assert len(result.details["errors"][0]["message"]) <= 300
