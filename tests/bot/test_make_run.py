"""What the README says `make run` and `make test` do, read from the Makefile with `make -n` (which runs nothing).

`make run` installs what serving needs (`pip install -e .`); `make test` and `make lint` install the
development tools too (`.[dev]`), on a fresh clone and after a `make run`. Where a stamp must really
be made, the install is stood in for by `PY=true` (every `$(PY) -m pip ...` line then does nothing):
what is checked is which stamps each target makes and needs, not pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_INSTALL = "pip install --quiet -e .\n"
DEV_INSTALL = "pip install --quiet -e '.[dev]'"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(folder: Path, *args: str, dry: bool = True) -> str:
    # --no-print-directory: under `make test` this is a sub-make, which would otherwise print where it is
    done = subprocess.run(["make", *(["-n"] if dry else []), "--no-print-directory", *args], cwd=folder,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def planned(folder: Path, *args: str) -> str:
    return make(folder, "run", *args)


def installed_by(folder: Path, stamp: str) -> None:
    """Make ``stamp`` as its recipe does, with `true` for the venv's python: the stamps, not the install."""
    (folder / ".venv").mkdir(exist_ok=True)
    make(folder, f".venv/{stamp}", f"PY={shutil.which('true')}", dry=False)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_a_fresh_clone_gets_a_venv_what_serving_needs_and_serves_the_example(clone: Path) -> None:
    plan = planned(clone)
    assert "-m venv .venv" in plan
    assert RUN_INSTALL in plan
    assert "[dev]" not in plan  # pytest, ruff and mypy are not needed to serve
    assert plan.rstrip().endswith(".venv/bin/loopbot serve --config config.example.yaml")


@pytest.mark.parametrize("target", ["test", "lint"])
def test_make_test_and_make_lint_install_the_development_tools_on_a_fresh_clone(clone: Path, target: str) -> None:
    plan = make(clone, target)
    assert "-m venv .venv" in plan and DEV_INSTALL in plan


@pytest.mark.parametrize("target", ["test", "lint"])
def test_after_make_run_make_test_and_lint_still_install_the_development_tools(clone: Path, target: str) -> None:
    installed_by(clone, ".run-stamp")
    assert planned(clone).strip() == ".venv/bin/loopbot serve --config config.example.yaml"
    assert DEV_INSTALL in make(clone, target)


def test_after_make_test_make_run_installs_nothing_more(clone: Path) -> None:
    installed_by(clone, ".installed-stamp")
    assert planned(clone).strip() == ".venv/bin/loopbot serve --config config.example.yaml"
    assert DEV_INSTALL not in make(clone, "test")


def test_a_config_yaml_is_served_when_there_is_one_and_config_picks_another(clone: Path) -> None:
    (clone / "config.yaml").write_text("loops: []\n")
    assert planned(clone).rstrip().endswith(".venv/bin/loopbot serve --config config.yaml")
    assert planned(clone, "CONFIG=other.yaml").rstrip().endswith(".venv/bin/loopbot serve --config other.yaml")


def test_an_installed_venv_is_not_installed_again_until_pyproject_changes(clone: Path) -> None:
    stamp = clone / ".venv" / ".run-stamp"
    stamp.parent.mkdir()
    stamp.touch()
    later = (clone / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    assert planned(clone).strip() == ".venv/bin/loopbot serve --config config.example.yaml"
    os.utime(clone / "pyproject.toml", (later + 10, later + 10))
    assert RUN_INSTALL in planned(clone)


def test_ci_lints_then_tests(clone: Path) -> None:
    """.ci/run runs on a clean clone: `make lint` first, which must install what it needs itself."""
    steps = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert steps == ["make lint", "make test"]
    assert DEV_INSTALL in make(clone, "lint")
