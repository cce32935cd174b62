"""Does the output parse? Python via ``compile``, JSON via ``json.loads``.

YAML is left out on purpose: ``loop_engine`` depends only on the standard
library plus what JSON Schema needs. Every source is checked (the output,
then matching files by path) so one run reports every broken file; the
message names the first error's file, line and column (1-based).
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .base import DeterministicGate, GateContext, GateResult, Severity
from .sources import Source, collect_sources

__all__ = ["SUPPORTED_LANGUAGES", "SyntaxGate"]

#: language -> file name endings checked in ``context.files``.
SUPPORTED_LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "json": (".json",),
}


@dataclass(frozen=True)
class _SyntaxProblem:
    file: str
    line: int | None
    column: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.column, "message": self.message}

    def describe(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (JSON has no NaN or Infinity)")


def _check_python(source: Source) -> _SyntaxProblem | None:
    try:
        # A full compile (never executed) also catches errors the parser alone
        # lets through, such as ``return`` outside a function.
        # Warnings (e.g. invalid escape sequences) are not syntax errors; silencing
        # them keeps the verdict independent of the caller's warning filters.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source.text, source.label, "exec", dont_inherit=True)
    except SyntaxError as exc:  # includes IndentationError and TabError
        column = exc.offset if exc.offset and exc.offset > 0 else None
        return _SyntaxProblem(source.label, exc.lineno, column, f"{type(exc).__name__}: {exc.msg}")
    except ValueError as exc:  # e.g. null bytes in the source
        return _SyntaxProblem(source.label, None, None, f"invalid source: {exc}")
    except (RecursionError, MemoryError):
        return _SyntaxProblem(source.label, None, None, "source is nested too deeply to parse")
    return None


def _check_json(source: Source) -> _SyntaxProblem | None:
    try:
        json.loads(source.text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return _SyntaxProblem(source.label, exc.lineno, exc.colno, f"JSONDecodeError: {exc.msg}")
    except ValueError as exc:  # NaN/Infinity, or an integer longer than Python allows
        return _SyntaxProblem(source.label, None, None, f"invalid JSON: {exc}")
    except RecursionError:
        return _SyntaxProblem(source.label, None, None, "JSON is nested too deeply to parse")
    return None


_CHECKERS = {"python": _check_python, "json": _check_json}


class SyntaxGate(DeterministicGate):
    """Fails when the output or any matching file does not parse in ``language``."""

    name = "syntax"

    def __init__(
        self,
        language: str = "python",
        *,
        name: str | None = None,
        severity: str | Severity | None = None,
    ) -> None:
        super().__init__(name=name, severity=severity)
        if language not in SUPPORTED_LANGUAGES:
            raise ConfigurationError(
                f"SyntaxGate cannot check language {language!r}; use one of {sorted(SUPPORTED_LANGUAGES)}"
            )
        self.language = language

    def check(self, context: GateContext) -> GateResult:
        sources = collect_sources(context, SUPPORTED_LANGUAGES[self.language])
        if sources.problems:
            return self.result(
                False,
                f"cannot check {self.language} syntax: {sources.problems[0]}",
                language=self.language,
                problems=sources.problems,
            )
        if not sources.texts:
            endings = ", ".join(SUPPORTED_LANGUAGES[self.language])
            return self.result(
                False,
                f"nothing to check: set context.output to text or add files ending in {endings}",
                language=self.language,
                checked=[],
            )
        checker = _CHECKERS[self.language]
        errors = [p for p in (checker(s) for s in sources.texts) if p is not None]
        checked = [s.label for s in sources.texts]
        if not errors:
            message = f"{len(checked)} {self.language} source(s) parse"
            return self.result(True, message, language=self.language, checked=checked)
        first = errors[0]
        return self.result(
            False,
            f"{self.language} syntax error at {first.describe()}",
            language=self.language,
            checked=checked,
            file=first.file,
            line=first.line,
            column=first.column,
            errors=[e.as_dict() for e in errors],
        )
