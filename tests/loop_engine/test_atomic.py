"""The one atomic write: its fsync order, and the temp files a real SIGKILL leaves behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import loop_engine.atomic as atomic
from loop_engine.atomic import atomic_write_text, remove_stale_temp_files

#: Writes through atomic_write_bytes, but hangs where the rename would be, so it can be killed there.
_HANG_BEFORE_RENAME = """
import os, sys, time
import loop_engine.atomic as atomic
atomic.os.replace = lambda *a: time.sleep(60)
atomic.atomic_write_text(sys.argv[1], "new")
"""


def _killed_mid_write(target: Path) -> Path:
    writer = subprocess.Popen([sys.executable, "-c", _HANG_BEFORE_RENAME, str(target)])
    try:
        deadline = time.monotonic() + 10
        while not (temps := list(target.parent.glob(".*.tmp"))):
            assert time.monotonic() < deadline, "the writer never created its temp file"
            time.sleep(0.01)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    (temp,) = temps
    return temp


def test_a_write_killed_before_its_rename_leaves_the_old_file_and_a_temp_that_the_sweep_removes(
    tmp_path: Path,
) -> None:
    target = tmp_path / "runs" / "demo-run-1.json"
    atomic_write_text(target, "old")
    temp = _killed_mid_write(target)
    assert target.read_text() == "old" and temp.read_text() == "new"

    assert remove_stale_temp_files(tmp_path, now=time.time()) == []  # young: might be a live writer
    assert remove_stale_temp_files(tmp_path, now=time.time() + 61) == [temp]
    assert not temp.exists() and target.read_text() == "old"


def test_the_sweep_touches_only_old_temp_files_in_every_subdirectory(tmp_path: Path) -> None:
    keep = [tmp_path / "runs" / "a.json", tmp_path / ".lock", tmp_path / "notes.tmp", tmp_path / "x" / ".young.tmp"]
    stale = [tmp_path / ".a.json.1.tmp", tmp_path / "reviews" / "deep" / ".b.json.2.tmp"]
    for path in keep + stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    hour_ago = time.time() - 3600
    for path in keep[:3] + stale:
        os.utime(path, (hour_ago, hour_ago))

    assert remove_stale_temp_files(tmp_path) == sorted(stale)
    assert all(path.exists() for path in keep) and not any(path.exists() for path in stale)


def test_an_empty_or_missing_directory_has_nothing_to_remove(tmp_path: Path) -> None:
    assert remove_stale_temp_files(tmp_path) == []
    assert remove_stale_temp_files(tmp_path / "absent") == []


def test_a_durable_write_fsyncs_the_file_before_the_rename_and_the_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "d").mkdir()
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(atomic.os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    monkeypatch.setattr(atomic, "fsync_directory", lambda d: events.append(f"fsync dir {d.name}"))

    atomic.atomic_write_text(tmp_path / "d" / "a.json", "x")
    assert events == ["fsync", "replace", "fsync dir d"]
    events.clear()
    atomic.atomic_write_text(tmp_path / "d" / "a.json", "y", durable=False)
    assert events == ["replace"]


def test_new_directories_are_made_durable_in_their_parents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(atomic, "fsync_directory", synced.append)
    atomic.atomic_write_text(tmp_path / "a" / "b" / "f.json", "x")
    assert synced == [tmp_path, tmp_path / "a", tmp_path / "a" / "b"]  # each new entry, then the rename
    synced.clear()
    atomic.atomic_write_text(tmp_path / "a" / "b" / "g.json", "x")
    assert synced == [tmp_path / "a" / "b"]  # existing directories cost nothing extra
