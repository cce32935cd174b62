"""Does the output leak a secret or call something dangerous?

Two kinds of rule, looking in different places on purpose:

* **Secret rules** (``secret.*``) scan the *whole text* of every source,
  string literals and comments included - that is where secrets live. They
  are plain regexes over each line, so they also work on text that is not
  Python (JSON, YAML, a diff). A finding never repeats the secret: it shows
  only the first four characters.
* **Code rules** (``code.*``) look only at *code*: they walk the Python AST,
  so a call written in a comment (``# eval(x)``) or inside a string literal
  (``"os.system('x')"``) is never a finding, while a call inside an
  f-string replacement field (``f"{eval(x)}"``) is, because it runs. Imports
  are followed (``from os import system as run; run(...)`` is found), but
  dynamic access (``getattr(os, "system")``) is not. Python source that does
  not parse cannot be vouched for, so it yields a ``code.unparseable``
  finding (fail closed).

Code rules apply to ``context.output`` (unless ``output_is_python=False``)
and to files ending in ``.py``/``.pyi``; secret rules apply to every source.
Lines and columns are 1-based and count characters.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ..errors import ConfigurationError
from .base import DeterministicGate, GateContext, GateResult, Severity
from .sources import OUTPUT_LABEL, Source, collect_sources

__all__ = ["ALL_RULES", "CODE_RULES", "SECRET_RULES", "Finding", "SecurityGate"]

#: rule id -> (pattern, what it means). Patterns match within one line.
SECRET_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "secret.aws-access-key-id": (
        re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        "hard-coded AWS access key id",
    ),
    "secret.aws-secret-access-key": (
        re.compile(r"(?i)aws_?secret_?access_?key\W{0,4}[:=]\s*['\"]?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"),
        "hard-coded AWS secret access key",
    ),
    "secret.private-key": (
        re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
        "private key block",
    ),
    "secret.github-token": (
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
        "GitHub token",
    ),
    "secret.slack-token": (
        re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        "Slack token",
    ),
}

#: rule id -> what it means. Matching lives in ``_CodeScanner``.
CODE_RULES: dict[str, str] = {
    "code.eval": "eval() runs arbitrary code",
    "code.exec": "exec() runs arbitrary code",
    "code.os-shell": "os.system()/os.popen() run a shell command",
    "code.subprocess-shell": "subprocess call through a shell",
    "code.pickle-load": "unpickling untrusted data runs arbitrary code",
    "code.unparseable": "Python source does not parse, so its code cannot be checked",
}

ALL_RULES = frozenset(SECRET_RULES) | frozenset(CODE_RULES)

_CALL_RULES = {
    "eval": "code.eval",
    "builtins.eval": "code.eval",
    "exec": "code.exec",
    "builtins.exec": "code.exec",
    "os.system": "code.os-shell",
    "os.popen": "code.os-shell",
    "pickle.load": "code.pickle-load",
    "pickle.loads": "code.pickle-load",
    "_pickle.load": "code.pickle-load",
    "_pickle.loads": "code.pickle-load",
    "subprocess.getoutput": "code.subprocess-shell",
    "subprocess.getstatusoutput": "code.subprocess-shell",
}
_SHELL_CAPABLE = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen"}
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, order=True)
class Finding:
    """One match: where (file, 1-based line and column), which rule, and why."""

    file: str
    line: int
    column: int
    rule: str
    message: str


def _redact(secret: str) -> str:
    return f"{secret[:4]}... ({len(secret)} chars)"


def _scan_secrets(source: Source, lines: list[str], rules: Iterable[str]) -> list[Finding]:
    findings = []
    for rule in rules:
        pattern, meaning = SECRET_RULES[rule]
        for number, line in enumerate(lines, start=1):
            for match in pattern.finditer(line):
                findings.append(
                    Finding(source.label, number, match.start() + 1, rule, f"{meaning}: {_redact(match.group())}")
                )
    return findings


class _CodeScanner(ast.NodeVisitor):
    """Finds dangerous calls, resolving names through the module's imports."""

    def __init__(self, tree: ast.AST) -> None:
        self.aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        self.hits: list[tuple[ast.Call, str, str]] = []

    def _qualname(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._qualname(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def visit_Call(self, node: ast.Call) -> None:
        qualname = self._qualname(node.func)
        if qualname in _CALL_RULES:
            self.hits.append((node, _CALL_RULES[qualname], f"call to {qualname}()"))
        elif qualname in _SHELL_CAPABLE and any(
            kw.arg == "shell" and isinstance(kw.value, ast.Constant) and bool(kw.value.value) for kw in node.keywords
        ):
            self.hits.append((node, "code.subprocess-shell", f"{qualname}() with shell=True"))
        self.generic_visit(node)


def _char_column(line: str, byte_offset: int) -> int:
    """AST columns are UTF-8 byte offsets; findings count characters."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1


def _scan_code(source: Source, lines: list[str], rules: set[str]) -> list[Finding]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source.text, filename=source.label)
    except SyntaxError as exc:
        if "code.unparseable" not in rules:
            return []
        detail = f"{CODE_RULES['code.unparseable']} ({exc.msg})"
        return [Finding(source.label, exc.lineno or 1, max(exc.offset or 1, 1), "code.unparseable", detail)]
    except (ValueError, RecursionError, MemoryError) as exc:
        if "code.unparseable" not in rules:
            return []
        detail = f"{CODE_RULES['code.unparseable']} ({type(exc).__name__})"
        return [Finding(source.label, 1, 1, "code.unparseable", detail)]
    scanner = _CodeScanner(tree)
    scanner.visit(tree)
    findings = []
    for node, rule, what in scanner.hits:
        if rule in rules:
            line = lines[node.lineno - 1] if 0 < node.lineno <= len(lines) else ""
            column = _char_column(line, node.col_offset)
            findings.append(Finding(source.label, node.lineno, column, rule, f"{CODE_RULES[rule]}: {what}"))
    return findings


class SecurityGate(DeterministicGate):
    """Fails on any finding; ``details["findings"]`` lists them all, sorted by place."""

    name = "security"

    def __init__(
        self,
        *,
        disabled_rules: Iterable[str] = (),
        output_is_python: bool = True,
        name: str | None = None,
        severity: str | Severity | None = None,
    ) -> None:
        super().__init__(name=name, severity=severity)
        disabled = set(disabled_rules)
        unknown = disabled - ALL_RULES
        if unknown:
            raise ConfigurationError(f"SecurityGate has no rule(s) {sorted(unknown)}; known rules: {sorted(ALL_RULES)}")
        self.secret_rules = sorted(set(SECRET_RULES) - disabled)
        self.code_rules = set(CODE_RULES) - disabled
        self.output_is_python = output_is_python

    def _is_python(self, source: Source) -> bool:
        if source.label == OUTPUT_LABEL:
            return self.output_is_python
        return source.label.lower().endswith((".py", ".pyi"))

    def check(self, context: GateContext) -> GateResult:
        sources = collect_sources(context)
        if sources.problems:
            return self.result(False, f"cannot scan: {sources.problems[0]}", findings=[], problems=sources.problems)
        if not sources.texts:
            return self.result(False, "nothing to scan: set context.output to text or add context.files", findings=[])
        findings: list[Finding] = []
        for source in sources.texts:
            lines = _LINE_BREAK.split(source.text)
            findings.extend(_scan_secrets(source, lines, self.secret_rules))
            if self._is_python(source):
                findings.extend(_scan_code(source, lines, self.code_rules))
        findings.sort()
        scanned = [s.label for s in sources.texts]
        if not findings:
            return self.result(True, f"no findings in {len(scanned)} source(s)", findings=[], scanned=scanned)
        first = findings[0]
        return self.result(
            False,
            f"{len(findings)} security finding(s); first: {first.rule} at {first.file}:{first.line}:{first.column}"
            f" - {first.message}",
            findings=[asdict(f) for f in findings],
            scanned=scanned,
        )
