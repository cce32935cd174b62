"""loop_engine's modules import one another without a circle, type-only imports included.

A circle hidden behind ``TYPE_CHECKING`` still makes two modules that can only
be read, moved or tested together; this walks the real import statements.
"""

from __future__ import annotations

import ast
from pathlib import Path

import loop_engine

ROOT = Path(loop_engine.__file__).parent


def module_name(path: Path) -> str:
    parts = ("loop_engine", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The loop_engine modules ``path`` imports, at run time or for the type checker alike."""
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{target}.{alias.name}" for alias in node.names} | {target}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("loop_engine"):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("loop_engine")}
    return found


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in ROOT.rglob("*.py")}
    # the package itself re-exports everything lazily; an edge into it is no dependency on a module
    return {name: (imports_of(path) & files.keys()) - {"loop_engine", name} for name, path in files.items()}


def a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            cycle = walk(target, [*path, node])
            if cycle is not None:
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = walk(start, [])
        if cycle is not None:
            return cycle
    return None


def test_no_loop_engine_module_imports_itself_back_through_others() -> None:
    cycle = a_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_walk_sees_type_only_imports() -> None:
    graph = import_graph()
    assert "loop_engine.review" in graph["loop_engine.types"]  # under TYPE_CHECKING only
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_ids_stand_on_nothing_of_the_engine() -> None:
    """Data types, persistence and the checkpoint all name runs; the ids they share import none of them."""
    assert import_graph()["loop_engine.ids"] == set()
