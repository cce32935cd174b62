"""What the README says `make run` does, read from the Makefile with `make -n` (which runs nothing)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(folder: Path, *args: str) -> str:
    # --no-print-directory: under `make test` this is a sub-make, which would otherwise print where it is
    done = subprocess.run(["make", "-n", "--no-print-directory", "run", *args], cwd=folder, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def test_a_fresh_clone_gets_a_venv_an_install_and_serves_the_example(clone: Path) -> None:
    plan = planned(clone)
    assert "-m venv .venv" in plan
    assert "pip install --quiet -e '.[dev]'" in plan
    assert plan.rstrip().endswith(".venv/bin/loopbot serve --config config.example.yaml")


def test_a_config_yaml_is_served_when_there_is_one_and_config_picks_another(clone: Path) -> None:
    (clone / "config.yaml").write_text("loops: []\n")
    assert planned(clone).rstrip().endswith(".venv/bin/loopbot serve --config config.yaml")
    assert planned(clone, "CONFIG=other.yaml").rstrip().endswith(".venv/bin/loopbot serve --config other.yaml")


def test_an_installed_venv_is_not_installed_again(clone: Path) -> None:
    stamp = clone / ".venv" / ".installed-stamp"
    stamp.parent.mkdir()
    stamp.touch()
    later = (clone / "pyproject.toml").stat().st_mtime + 10
    os.utime(stamp, (later, later))
    assert planned(clone).strip() == ".venv/bin/loopbot serve --config config.example.yaml"
