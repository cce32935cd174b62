"""SyntaxGate: python and JSON, with the place of the first error."""

from __future__ import annotations

import warnings

import pytest

from loop_engine.errors import ConfigurationError
from loop_engine.gates import GateContext, Severity, SyntaxGate


def test_valid_python_passes() -> None:
    result = SyntaxGate().check(GateContext(output="def f(x):\n    return x + 1\n"))
    assert result.passed and result.details["checked"] == ["<output>"]


def test_python_error_reports_file_line_column() -> None:
    result = SyntaxGate().check(GateContext(files={"pkg/mod.py": "x = 1\ndef f(:\n    pass\n"}))
    assert not result.passed and result.blocks
    assert (result.details["file"], result.details["line"], result.details["column"]) == ("pkg/mod.py", 2, 7)
    assert "pkg/mod.py:2:7" in result.message


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("return 1\n", 1),  # caught by compile, not by the parser alone
        ("if x:\n\tpass\n        pass\n", 3),  # TabError
        ("x = (\n1,\n", 1),  # unclosed bracket
    ],
)
def test_python_errors_beyond_the_parser(source: str, line: int) -> None:
    result = SyntaxGate().check(GateContext(output=source))
    assert not result.passed and result.details["line"] == line


def test_null_bytes_and_deep_nesting_fail_without_raising() -> None:
    assert not SyntaxGate().check(GateContext(output="a\0b")).passed
    assert not SyntaxGate().check(GateContext(output="(" * 100_000)).passed


def test_verdict_ignores_callers_warning_filters() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert SyntaxGate().check(GateContext(output='x = "\\d"\n')).passed


def test_every_broken_file_is_listed_first_one_by_path_named() -> None:
    files = {"b.py": "def (", "a.py": "x = [", "ok.py": "y = 1", "notes.txt": "def ("}
    result = SyntaxGate().check(GateContext(files=files))
    assert result.details["checked"] == ["a.py", "b.py", "ok.py"]
    assert [e["file"] for e in result.details["errors"]] == ["a.py", "b.py"]
    assert result.details["file"] == "a.py"


def test_json_pass_and_fail_with_position() -> None:
    gate = SyntaxGate("json")
    assert gate.check(GateContext(output='{"a": [1, 2]}')).passed
    result = gate.check(GateContext(output='{"a":\n 1,}'))
    assert not result.passed and (result.details["line"], result.details["column"]) == (2, 4)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", "1" * 5000, "[" * 100_000])
def test_json_edge_cases_fail_cleanly(text: str) -> None:
    result = SyntaxGate("json").check(GateContext(output=text))
    assert not result.passed and result.details["errors"]


def test_json_gate_checks_only_json_files() -> None:
    result = SyntaxGate("json").check(GateContext(files={"a.json": "[]", "b.py": "not json"}))
    assert result.passed and result.details["checked"] == ["a.json"]


def test_nothing_to_check_fails_with_what_to_do() -> None:
    result = SyntaxGate().check(GateContext(files={"README.md": "# hi"}))
    assert not result.passed and "nothing to check" in result.message and ".py" in result.message


def test_non_text_output_fails() -> None:
    result = SyntaxGate("json").check(GateContext(output={"a": 1}))
    assert not result.passed and "expected text" in result.message


def test_unknown_language_and_configurable_severity() -> None:
    with pytest.raises(ConfigurationError, match="cannot check language 'yaml'"):
        SyntaxGate("yaml")
    result = SyntaxGate(severity="warning", name="py-syntax").check(GateContext(output="def ("))
    assert result.gate_name == "py-syntax" and result.severity is Severity.WARNING and not result.blocks
