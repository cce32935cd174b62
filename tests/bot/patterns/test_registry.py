"""The pattern registry and ``module:callable`` factories."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import bot.patterns as patterns
from bot.patterns import (
    FactoryError,
    LoopSpec,
    PatternError,
    UnknownPatternError,
    available_patterns,
    get_pattern,
    load_factory,
    register_pattern,
)
from bot.patterns.demo import build as demo_build
from loop_engine.types import LoopContext


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "_registry", {})


def builder(options: dict[str, object]) -> LoopSpec:
    return LoopSpec(engine_factory=lambda **_: None, context_factory=LoopContext)  # type: ignore[arg-type,return-value]


NOT_CALLABLE = 42


def test_demo_is_built_in() -> None:
    assert "demo" in available_patterns()
    assert get_pattern("demo") is demo_build


def test_register_and_get(clean_registry: None) -> None:
    register_pattern("nightly", builder)
    assert get_pattern("nightly") is builder
    assert available_patterns() == ["daily-triage", "demo", "nightly"]


@pytest.mark.parametrize(
    ("name", "message"),
    [("demo", "already registered"), ("Bad Name", "must be lower-case"), ("", "must be lower-case")],
)
def test_register_refuses(clean_registry: None, name: str, message: str) -> None:
    with pytest.raises(PatternError, match=message):
        register_pattern(name, builder)


def test_register_refuses_a_duplicate_and_a_non_callable(clean_registry: None) -> None:
    register_pattern("x", builder)
    with pytest.raises(PatternError, match="'x' is already registered"):
        register_pattern("x", builder)
    with pytest.raises(PatternError, match="must be callable"):
        register_pattern("y", 3)  # type: ignore[arg-type]


def test_unknown_pattern_lists_known_ones_with_did_you_mean(clean_registry: None) -> None:
    register_pattern("nightly", builder)
    with pytest.raises(UnknownPatternError) as info:
        get_pattern("dmo")
    assert str(info.value) == 'unknown pattern "dmo" - did you mean "demo"? Known patterns: daily-triage, demo, nightly'
    with pytest.raises(UnknownPatternError, match=r'^unknown pattern "zzz"\. Known patterns'):
        get_pattern("zzz")


def test_load_factory_resolves_module_callable() -> None:
    assert load_factory("bot.patterns.demo:build") is demo_build
    assert load_factory(f"{__name__}:builder") is builder


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("no_such_pkg_xyz.loops:build", 'cannot import no_such_pkg_xyz.loops: module "no_such_pkg_xyz" not found'),
        ("bot.no_such_module:build", 'cannot import bot.no_such_module: module "bot.no_such_module" not found'),
        ("bot.patterns.demo:nothing", 'module "bot.patterns.demo" has no attribute "nothing"'),
        (f"{__name__}:NOT_CALLABLE", "is a int, not a callable"),
        ("bot.patterns.demo", 'must look like "package.module:callable"'),
        ("bot.patterns.demo:", 'must look like "package.module:callable"'),
        (":build", 'must look like "package.module:callable"'),
    ],
)
def test_load_factory_errors(reference: str, message: str) -> None:
    with pytest.raises(FactoryError) as info:
        load_factory(reference)
    assert message in str(info.value)


def test_a_factory_whose_own_import_fails_shows_that_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "brokenloops_e1.py").write_text("import missing_dependency_e1\n\ndef build(options):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(FactoryError, match="cannot import brokenloops_e1: ModuleNotFoundError: .*missing_dep"):
        load_factory("brokenloops_e1:build")
    sys.modules.pop("brokenloops_e1", None)


def test_a_factory_module_that_fails_at_import_is_a_factory_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the user's module raises while importing, `check` must report it as a config problem."""
    (tmp_path / "brokenloops_e2.py").write_text("def build(options:\n")
    (tmp_path / "brokenloops_e3.py").write_text("raise RuntimeError('needs $API_URL')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(FactoryError, match="cannot import brokenloops_e2: SyntaxError"):
        load_factory("brokenloops_e2:build")
    with pytest.raises(FactoryError, match=r"cannot import brokenloops_e3: RuntimeError: needs \$API_URL"):
        load_factory("brokenloops_e3:build")
    for name in ("brokenloops_e2", "brokenloops_e3"):
        sys.modules.pop(name, None)
