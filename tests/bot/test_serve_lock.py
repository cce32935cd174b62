"""ServeLock: one serve per state dir, freed by the kernel when the holder dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bot.serve_lock import ROLE_RUN, ROLE_SERVE, AlreadyRunningError, ServeLock, role_of

ROOT = Path(__file__).resolve().parents[3]

HOLDER = """
import sys
from bot.serve_lock import ServeLock
ServeLock(sys.argv[1]).acquire(port=8123)
print("locked", flush=True)
sys.stdin.read()  # hold until the parent closes stdin or kills us
"""


def test_second_acquire_in_process_fails_naming_the_pid(tmp_path: Path) -> None:
    first = ServeLock(tmp_path)
    first.acquire(port=0)
    with pytest.raises(AlreadyRunningError) as info:
        ServeLock(tmp_path).acquire()
    assert f"pid {os.getpid()}" in str(info.value) and info.value.pid == os.getpid()
    first.update(port=4567)
    assert ServeLock.holder(tmp_path)["port"] == 4567
    first.release()
    assert ServeLock.holder(tmp_path) is None
    with ServeLock(tmp_path) as again:
        assert again.held


def test_holder_is_none_without_a_lock_file_or_a_live_holder(tmp_path: Path) -> None:
    assert ServeLock.holder(tmp_path) is None
    (tmp_path / "serve.lock").write_text('{"pid": 999999, "port": 1}')  # stale file from a dead process
    assert ServeLock.holder(tmp_path) is None
    ServeLock(tmp_path).acquire()


def test_update_needs_the_lock(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="acquire"):
        ServeLock(tmp_path).update(port=1)


def test_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        holder = ServeLock.holder(tmp_path)
        assert holder is not None and holder["pid"] == child.pid and holder["port"] == 8123
        with pytest.raises(AlreadyRunningError, match=f"pid {child.pid}"):
            ServeLock(tmp_path).acquire()
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert ServeLock.holder(tmp_path) is None
    lock = ServeLock(tmp_path)
    assert lock.acquire()["pid"] == os.getpid()
    lock.release()


def test_the_lock_names_its_holders_role(tmp_path: Path) -> None:
    """A foreground `run` never reads the inbox: whoever finds the lock taken must know it is not a server."""
    run = ServeLock(tmp_path)
    run.acquire(role=ROLE_RUN)
    holder = ServeLock.holder(tmp_path)
    assert holder is not None and holder["role"] == "run" and role_of(holder) == ROLE_RUN
    with pytest.raises(AlreadyRunningError) as info:
        ServeLock(tmp_path).acquire()
    assert info.value.role == ROLE_RUN
    assert f"a foreground `loopbot run` (pid {os.getpid()}" in str(info.value)
    assert "loopbot serve" in str(info.value) and "another loopbot serve" not in str(info.value)
    run.release()
    with ServeLock(tmp_path) as serve:
        assert serve.info["role"] == ROLE_SERVE
        with pytest.raises(AlreadyRunningError, match="another loopbot serve") as info:
            ServeLock(tmp_path).acquire(role=ROLE_RUN)
        assert info.value.role == ROLE_SERVE


def test_a_lock_file_from_before_roles_reads_as_a_server(tmp_path: Path) -> None:
    with ServeLock(tmp_path):
        (tmp_path / "serve.lock").write_text(json.dumps({"pid": os.getpid(), "port": 8123}))  # an older writer
        holder = ServeLock.holder(tmp_path)
        assert holder == {"pid": os.getpid(), "port": 8123} and role_of(holder) == ROLE_SERVE
        with pytest.raises(AlreadyRunningError, match=f"another loopbot serve \\(pid {os.getpid()}, port 8123") as info:
            ServeLock(tmp_path).acquire(role=ROLE_RUN)
        assert info.value.role == ROLE_SERVE
