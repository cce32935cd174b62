"""One meaning per name: no two public classes of loopbot's packages share a name, and no module says ``worker``.

Two ``LoopConfig``s (the engine's settings and a ``loops:`` entry) or two
``RunInterrupted``s made a reader open both to learn which one a line meant.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("loop_engine", "adapters", "bot")


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_no_two_public_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in _modules():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_no_module_is_named_for_threads_it_does_not_explain() -> None:
    assert [str(p.relative_to(REPO)) for p in _modules() if p.stem == "worker"] == []
