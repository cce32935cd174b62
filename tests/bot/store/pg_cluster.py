"""A throwaway PostgreSQL cluster for the tests: one per test session, started on first use.

``initdb`` into a temp dir and ``pg_ctl start`` listening only on a unix
socket in that dir (no TCP port to collide with). The server refuses to run
as root, so as root both run as the ``postgres`` system user (``runuser``).
``stop()`` (registered to run at exit) stops the
server and removes the dir.

Without the binaries the PostgreSQL tests skip, saying why; with ``CI=true``
they fail instead, so CI proves they ran.
"""

from __future__ import annotations

import atexit
import getpass
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

__all__ = ["PG_BIN", "url", "schema_for", "stop", "unavailable"]

PG_BIN = Path(os.environ.get("LOOPBOT_PG_BIN", "/usr/lib/postgresql/15/bin"))
_lock = threading.Lock()
_state: dict[str, object] = {}


def _as_server_user() -> list[str]:
    """The prefix that runs a command as a user PostgreSQL accepts (not root)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        raise RuntimeError("running as root and no runuser(1) to start PostgreSQL as the postgres user")
    return [runuser, "-u", "postgres", "--"]


def unavailable() -> str | None:
    """Why no cluster can be started here, or None."""
    for tool in ("initdb", "pg_ctl"):
        if not (PG_BIN / tool).is_file():
            return f"no PostgreSQL server binaries ({PG_BIN / tool}; set LOOPBOT_PG_BIN or install postgresql-15)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]')"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres system user to run the server as"
    return None


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests must run in CI (CI=true), but: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL store tests skipped: {reason}")


def _start() -> str:
    root = Path(tempfile.mkdtemp(prefix="loopbot-pg-"))
    root.chmod(0o755)
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix = _as_server_user()
    if prefix:
        import pwd

        entry = pwd.getpwnam("postgres")
        os.chown(sock, entry.pw_uid, entry.pw_gid)
        os.chown(root, entry.pw_uid, entry.pw_gid)
        user = "postgres"
    else:
        user = getpass.getuser()
    _state["root"] = root
    _state["prefix"] = prefix
    _state["data"] = data
    run = {"check": True, "capture_output": True, "text": True, "cwd": root}
    try:
        subprocess.run([*prefix, str(PG_BIN / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
                        "-E", "UTF8", "--no-sync"], **run)  # type: ignore[call-overload]
        options = (f"-k {sock} -c listen_addresses='' -c fsync=off -c full_page_writes=off "
                   "-c max_connections=300 -c shared_buffers=32MB")
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l",
                        str(root / "server.log"), "-w", "-t", "60", "start"], **run)  # type: ignore[call-overload]
    except subprocess.CalledProcessError as err:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        stop()
        raise RuntimeError(f"could not start PostgreSQL: {err.stderr or err.stdout}\n{log}") from err
    _state["started"] = True
    atexit.register(stop)
    return f"postgresql://{user}@/postgres?host={sock}"


def url() -> str:
    """The cluster's URL, starting it on first call (skips, or fails under CI, when it cannot be started)."""
    with _lock:
        if "url" not in _state:
            reason = unavailable()
            if reason is not None:
                _skip_or_fail(reason)
            _state["url"] = _start()
        return str(_state["url"])


def schema_for(location: Path) -> str:
    """A schema name of its own for each test's location: a fresh schema per test, the same on reopening."""
    return "t_" + hashlib.sha256(str(location).encode()).hexdigest()[:20]


def stop() -> None:
    """Stop the server and remove its directory (harmless when nothing was started)."""
    root = _state.pop("root", None)
    data = _state.pop("data", None)
    prefix = _state.pop("prefix", [])
    _state.pop("url", None)
    if _state.pop("started", False) and data is not None:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],  # type: ignore[misc]
                       capture_output=True, check=False)
    if root is not None:
        shutil.rmtree(str(root), ignore_errors=True)
