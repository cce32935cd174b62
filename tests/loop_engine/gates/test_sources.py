"""What text-reading gates see: output first, then files by path; odd input is a problem, not a crash."""

from __future__ import annotations

from loop_engine.gates.base import GateContext
from loop_engine.gates.sources import OUTPUT_LABEL, collect_sources


def test_output_then_files_sorted_and_filtered_by_extension() -> None:
    found = collect_sources(GateContext(output="x", files={"b.py": "b", "a.py": "a", "c.txt": "c"}), [".py"])
    assert [(s.label, s.text) for s in found.texts] == [(OUTPUT_LABEL, "x"), ("a.py", "a"), ("b.py", "b")]
    assert found.problems == []


def test_extension_match_ignores_case_and_none_takes_all() -> None:
    assert [s.label for s in collect_sources(GateContext(files={"A.PY": ""}), [".py"]).texts] == ["A.PY"]
    assert len(collect_sources(GateContext(files={"a": "", "b.md": ""})).texts) == 2


def test_bytes_are_decoded_and_non_text_is_reported() -> None:
    found = collect_sources(GateContext(output=b"ok", files={"bad.py": b"\xff", "obj.py": 3}))  # type: ignore[dict-item]
    assert [s.text for s in found.texts] == ["ok"]
    assert any("bad.py: not UTF-8" in p for p in found.problems)
    assert any("obj.py: expected text (str), got int" in p for p in found.problems)


def test_files_that_are_not_a_mapping_are_reported() -> None:
    found = collect_sources(GateContext(files=["a.py"]))  # type: ignore[arg-type]
    assert found.texts == [] and "expected a dict" in found.problems[0]
    assert collect_sources(GateContext(files=None)).texts == []  # type: ignore[arg-type]
