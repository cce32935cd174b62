"""`loopbot init`, `--version`, subcommand help and an empty config: a newcomer's first commands."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, build_parser, main
from bot.init_config import example_config_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = (REPO / "config.example.yaml").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOOPBOT_CONFIG", raising=False)
    monkeypatch.setenv("USER", "alice")
    monkeypatch.setattr(sys, "argv", ["loopbot"])
    yield tmp_path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_packaged_example_is_the_repositorys_config_example() -> None:
    """Shipped as package data (bot/config.example.yaml), so an installed loopbot can write it."""
    assert example_config_text() == EXAMPLE


def test_init_writes_the_commented_example_to_config_yaml_and_check_accepts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = cli(capsys, "init")
    assert code == EXIT_OK
    assert (tmp_path / "config.yaml").read_text(encoding="utf-8") == EXAMPLE
    assert "wrote config.yaml" in out and "check" in out
    code, out, err = cli(capsys, "check")
    assert code == EXIT_OK, err
    assert "demo: pattern demo" in out


def test_init_never_overwrites_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text("loops: []\n", encoding="utf-8")
    code, out, err = cli(capsys, "init", str(mine))
    assert code == EXIT_FAILED
    assert f"{mine} already exists; not overwriting it" in err and out == ""
    assert mine.read_text(encoding="utf-8") == "loops: []\n"


def test_init_writes_the_file_the_other_commands_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without PATH: --config, else $LOOPBOT_CONFIG - so `init` then `check` agree on the file."""
    assert cli(capsys, "init", "--config", "a.yaml")[0] == EXIT_OK
    monkeypatch.setenv("LOOPBOT_CONFIG", str(tmp_path / "b.yaml"))
    code, out, _ = cli(capsys, "init")
    assert code == EXIT_OK and "--config" in out  # the next command it suggests names the file
    assert (tmp_path / "a.yaml").read_text(encoding="utf-8") == EXAMPLE
    assert (tmp_path / "b.yaml").read_text(encoding="utf-8") == EXAMPLE
    assert not (tmp_path / "config.yaml").exists()


def test_init_into_a_missing_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "init", "nowhere/config.yaml")
    assert code == EXIT_FAILED and "the folder nowhere does not exist" in err


def test_an_empty_config_is_valid_with_no_loops_and_check_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.yaml").write_text("", encoding="utf-8")
    code, out, err = cli(capsys, "check")
    assert code == EXIT_OK
    assert "loops: 0" in out
    assert "no loops configured" in err and "loopbot init" in err


def test_a_config_with_loops_gets_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "init")
    assert "warning" not in cli(capsys, "check")[2]


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import metadata

    try:
        installed = metadata.version("loopbot")
    except metadata.PackageNotFoundError:
        pytest.skip("loopbot is not installed here (the fallback is tested below)")
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"loopbot {installed}\n"


def test_version_falls_back_to_the_package_when_not_installed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import metadata

    import bot

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"loopbot {bot.__version__}\n"


@pytest.mark.parametrize("command", ["serve", "run", "status", "decide", "check", "init"])
def test_every_command_has_a_description_in_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args([command, "--help"])
    assert exit_.value.code == 0
    usage, _, rest = capsys.readouterr().out.partition("\n\n")
    description = rest.partition("\n\n")[0]
    assert usage.startswith(f"usage: loopbot {command}")
    assert len(description.split()) >= 8, f"{command} --help has no description: {rest!r}"


def test_init_is_in_the_command_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "init" in out and "loopbot init" in out


def test_an_unknown_command_is_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["inti"])
    assert exit_.value.code == EXIT_USAGE
