"""Does the output match a JSON Schema? Real validation through ``jsonschema``.

The validator class comes from the schema's ``$schema`` (Draft 2020-12 when
it has none) and checks ``format`` too. References resolve only against the
schema itself and an optional ``referencing.Registry`` the caller passes:
never over the network, so the verdict is deterministic and offline.
"""

from __future__ import annotations

import json
from typing import Any

# jsonschema ships no type hints (types-jsonschema is not a dependency); its API is checked by the tests.
import jsonschema  # type: ignore[import-untyped]
import referencing
import referencing.exceptions
from jsonschema import validators
from jsonschema.exceptions import SchemaError, ValidationError  # type: ignore[import-untyped]

from ..errors import ConfigurationError
from .base import DeterministicGate, GateContext, GateResult, Severity

__all__ = ["SchemaGate"]

#: Longest message kept per error; messages quote the instance, which can be huge.
_MAX_MESSAGE = 300


def _pointer(parts: Any) -> str:
    """A JSON Pointer (RFC 6901) for an error's location; "" is the whole document."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _describe(error: ValidationError) -> dict[str, Any]:
    message = error.message
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return {
        "path": _pointer(error.absolute_path),
        "schema_path": _pointer(error.absolute_schema_path),
        "validator": str(error.validator),
        "message": message,
    }


class SchemaGate(DeterministicGate):
    """Fails when ``context.output`` does not validate against ``schema``.

    The output is validated as it is: the text ``"3"`` is a string, not a
    number. Pass ``parse_json=True`` to parse text output as JSON first
    (text that is not JSON then fails).
    """

    name = "schema"

    def __init__(
        self,
        schema: dict[str, Any] | bool,
        *,
        parse_json: bool = False,
        registry: referencing.Registry[Any] | None = None,
        name: str | None = None,
        severity: str | Severity | None = None,
    ) -> None:
        super().__init__(name=name, severity=severity)
        if not isinstance(schema, (dict, bool)):
            raise ConfigurationError(
                f"SchemaGate needs a JSON Schema (a dict or a bool), got {type(schema).__name__}; "
                "load the schema with json.load before passing it"
            )
        validator_cls = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            # Boolean schemas are valid JSON Schema; the typeshed stubs only admit dicts.
            validator_cls.check_schema(schema)  # type: ignore[arg-type, unused-ignore]
        except SchemaError as exc:
            where = _pointer(exc.absolute_path) or "/"
            raise ConfigurationError(
                f"SchemaGate was given an invalid {validator_cls.__name__} schema at {where}: {exc.message}; "
                "fix the schema (or its $schema dialect)"
            ) from None
        self.schema = schema
        self.parse_json = parse_json
        self._validator = validator_cls(
            schema,
            registry=registry if registry is not None else referencing.Registry(),
            format_checker=validator_cls.FORMAT_CHECKER,
        )

    def _instance(self, context: GateContext) -> tuple[bool, Any, str]:
        """(ok, instance, problem): the value to validate, or why there is none."""
        output = context.output
        if not self.parse_json or not isinstance(output, (str, bytes, bytearray)):
            return True, output, ""
        try:
            return True, json.loads(output), ""
        except json.JSONDecodeError as exc:
            return False, None, f"output is not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        except (ValueError, RecursionError) as exc:  # undecodable bytes, huge integers, deep nesting
            return False, None, f"output is not JSON ({type(exc).__name__}: {exc})"

    def check(self, context: GateContext) -> GateResult:
        ok, instance, problem = self._instance(context)
        if not ok:
            return self.result(False, problem, errors=[])
        try:
            errors = sorted(
                (_describe(e) for e in self._validator.iter_errors(instance)),
                key=lambda d: (d["path"], d["schema_path"], d["message"]),
            )
        except referencing.exceptions.Unresolvable as exc:
            return self.result(
                False,
                f"schema reference cannot be resolved: {exc}; remote references are never fetched - "
                "embed the referenced schema under $defs or pass a registry that holds it",
                errors=[],
            )
        except RecursionError:
            return self.result(False, "output is nested too deeply to validate", errors=[])
        if not errors:
            return self.result(True, "output matches the schema", errors=[])
        first = errors[0]
        where = first["path"] or "the document root"
        return self.result(
            False,
            f"{len(errors)} schema error(s); first at {where}: {first['message']}",
            errors=errors,
            paths=[e["path"] for e in errors],
        )
