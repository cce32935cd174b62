"""No write of the bot follows a symlink, and the reads of hostile files do not either (issue #12 item 3)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from loop_engine.atomic import SymlinkRefusedError, atomic_write_text, read_text_no_follow


def test_a_symlinked_target_is_refused_and_neither_file_changes(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious", encoding="utf-8")
    state = tmp_path / "state"
    state.mkdir()
    link = state / "review.md"
    link.symlink_to(outside)
    with pytest.raises(SymlinkRefusedError) as caught:
        atomic_write_text(link, "overwritten")
    assert isinstance(caught.value, OSError) and caught.value.errno == errno.ELOOP
    assert caught.value.filename == str(link) and "symlink" in str(caught.value)
    assert outside.read_text(encoding="utf-8") == "precious"
    assert link.is_symlink()
    assert not list(state.glob(".*.tmp"))


def test_a_dangling_symlink_is_refused_too(tmp_path: Path) -> None:
    link = tmp_path / "doc.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SymlinkRefusedError):
        atomic_write_text(link, "{}")
    assert not (tmp_path / "elsewhere.json").exists()


def test_ordinary_writes_still_replace_the_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "doc.txt"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two")
    assert target.read_text(encoding="utf-8") == "two"


def test_read_text_no_follow_reads_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "demo-1.md"
    target.write_text("# Review ✓\n", encoding="utf-8")
    assert read_text_no_follow(target) == "# Review ✓\n"


def test_read_text_no_follow_refuses_a_symlink_naming_it(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("token=xoxb-not-yours", encoding="utf-8")
    link = tmp_path / "demo-1.md"
    link.symlink_to(secret)
    with pytest.raises(SymlinkRefusedError) as caught:
        read_text_no_follow(link)
    assert caught.value.filename == str(link)
    assert "xoxb" not in str(caught.value)


def test_read_text_no_follow_passes_a_missing_file_through(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_text_no_follow(tmp_path / "absent.md")


def test_read_text_no_follow_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "demo-1.md"
    os.mkfifo(fifo)
    with pytest.raises(SymlinkRefusedError, match="not a regular file"):
        read_text_no_follow(fifo)
