"""SecurityGate: secrets anywhere, dangerous calls only in code - never in comments or strings."""

from __future__ import annotations

from typing import Any

import pytest

from loop_engine.errors import ConfigurationError
from loop_engine.gates import GateContext, SecurityGate

AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"  # split so this test file itself holds no key-shaped literal


def findings(output: Any = None, files: dict[str, str] | None = None, **options: Any) -> list[tuple[str, int, int]]:
    result = SecurityGate(**options).check(GateContext(output=output, files=files or {}))
    assert result.passed == (not result.details["findings"])
    return [(f["rule"], f["line"], f["column"]) for f in result.details["findings"]]


def test_clean_code_passes() -> None:
    assert findings("import os\nprint(os.getcwd())\nmodel.eval()\nself.exec(q)\n") == []


@pytest.mark.parametrize(
    ("source", "rule"),
    [
        ("eval(x)\n", "code.eval"),
        ("exec(code)\n", "code.exec"),
        ("import os\nos.system('ls')\n", "code.os-shell"),
        ("import os\nos.popen('ls')\n", "code.os-shell"),
        ("import subprocess\nsubprocess.run('ls', shell=True)\n", "code.subprocess-shell"),
        ("import subprocess\nsubprocess.Popen('ls', shell=1)\n", "code.subprocess-shell"),
        ("import subprocess\nsubprocess.getoutput('ls')\n", "code.subprocess-shell"),
        ("import pickle\npickle.loads(blob)\n", "code.pickle-load"),
        ("import builtins\nbuiltins.eval('1')\n", "code.eval"),
    ],
)
def test_dangerous_calls_are_found(source: str, rule: str) -> None:
    assert [f[0] for f in findings(source)] == [rule]


def test_calls_in_comments_and_string_literals_are_not_code() -> None:
    source = (
        "# eval(x) and os.system('rm -rf /')\n"
        "doc = 'exec(payload)'\n"
        'cmd = "os.system(\\"ls\\")"\n'
        'text = """\nsubprocess.run(x, shell=True)\npickle.loads(b)\n"""\n'
        "x = 1  # exec(y)\n"
    )
    assert findings(source) == []


def test_f_string_replacement_fields_are_code() -> None:
    assert findings('f"{eval(s)}"\n') == [("code.eval", 1, 4)]


def test_imports_are_followed_and_shadowing_respected() -> None:
    source = (
        "import subprocess as sp\n"
        "from os import system as run\n"
        "from pickle import loads\n"
        "from mylib import eval\n"
        "sp.check_output('ls', shell=True)\n"
        "run('ls')\n"
        "loads(b'')\n"
        "eval('harmless, from mylib')\n"
        "sp.run(['ls'], shell=False)\n"
    )
    assert findings(source) == [
        ("code.subprocess-shell", 5, 1),
        ("code.os-shell", 6, 1),
        ("code.pickle-load", 7, 1),
    ]


def test_secrets_are_found_in_strings_and_comments_and_redacted() -> None:
    source = f'key = "{AWS_KEY}"\n# backup: {AWS_KEY}\n'
    result = SecurityGate().check(GateContext(output=source))
    assert [(f["rule"], f["line"], f["column"]) for f in result.details["findings"]] == [
        ("secret.aws-access-key-id", 1, 8),
        ("secret.aws-access-key-id", 2, 11),
    ]
    assert AWS_KEY not in result.message and AWS_KEY not in repr(result.details)
    assert "AKIA..." in result.message


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "secret.private-key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\n", "secret.private-key"),
        ("-----BEGIN PRIVATE KEY-----\n", "secret.private-key"),
        ("token: " + "ghp_" + "a" * 36 + "\n", "secret.github-token"),
        ("SLACK=" + "xoxb-" + "1234567890-abcdef\n", "secret.slack-token"),
        ("aws_secret_access_key = " + "A" * 40 + "\n", "secret.aws-secret-access-key"),
    ],
)
def test_secret_rules_scan_any_file(text: str, rule: str) -> None:
    assert [(r, line) for r, line, _ in findings(files={"conf/settings.env": text})] == [(rule, 1)]


def test_code_rules_apply_only_to_python_sources() -> None:
    assert findings(files={"notes.md": "eval(x)\n", "run.py": "eval(x)\n"}) == [("code.eval", 1, 1)]
    assert findings("eval(x)", output_is_python=False) == []


def test_columns_count_characters_not_bytes() -> None:
    assert findings("é = eval(s)\n") == [("code.eval", 1, 5)]


def test_unparseable_python_fails_closed_but_secrets_still_scanned() -> None:
    result = findings(f"def f(:\n    k = '{AWS_KEY}'\n")
    assert ("code.unparseable", 1, 7) in result
    assert ("secret.aws-access-key-id", 2, 10) in result
    assert [f[0] for f in findings("a\0b")] == ["code.unparseable"]


def test_findings_are_sorted_by_file_line_column() -> None:
    files = {"b.py": "exec(a)\neval(b)\n", "a.py": "x = 1; eval(c)\n"}
    assert findings(files=files) == [("code.eval", 1, 8), ("code.exec", 1, 1), ("code.eval", 2, 1)]
    result = SecurityGate().check(GateContext(files=files))
    assert [f["file"] for f in result.details["findings"]] == ["a.py", "b.py", "b.py"]
    assert result.message.startswith("3 security finding(s); first: code.eval at a.py:1:8")


def test_disabled_rules_and_unknown_rule_names() -> None:
    assert findings("eval(x)\n", disabled_rules=["code.eval"]) == []
    with pytest.raises(ConfigurationError, match="no rule"):
        SecurityGate(disabled_rules=["code.evil"])


def test_nothing_to_scan_or_non_text_fails() -> None:
    assert "nothing to scan" in SecurityGate().check(GateContext()).message
    assert "expected text" in SecurityGate().check(GateContext(output=42)).message
