"""LoopState on disk: one file per run, crash-safe, with a bounded history per run.

``format="json"`` stores every field (see ``loop_engine.serialization``) in
``loop_state_<trace_id>.json`` as ``{"schema_version": N, "state": {...}}``;
that is the format to resume from. ``format="markdown"`` (the default, as in
the tutorial) writes ``loop_state_<trace_id>.md``, a readable audit; loading
it restores only the header fields listed in
``loop_engine.audit.HEADER_FIELDS`` (trace id, status, execution state,
iteration, counters, stop reason, checkpoint counter, timestamps) - plan,
failures, observations and the rest come back empty.

Every write goes through ``loop_engine.atomic`` (temp file, fsync, rename,
directory fsync), always UTF-8. A save never lists the state directory: the last
``max_history`` snapshots of a trace are kept as ``history/<trace>/<seq>``
(hard links to the file each save wrote) and a save deletes exactly the one
that fell out, so saving costs the same with ten runs stored or ten
thousand, and never touches another run's files.
One process saves a given trace at a time.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from .atomic import atomic_write_bytes, fsync_directory, make_directories
from .errors import ConfigurationError, CorruptStateError, PersistenceError, SchemaVersionError
from .jsonvalue import decode_datetime, decode_enum, gc_paused
from .audit import parse_audit_header, render_state_markdown
from .deserialization import state_from_dict
from .serialization import SCHEMA_VERSION, encode_state
from .ids import new_trace_id, validate_trace_id
from .types import ExecutionState, LoopState, LoopStatus

__all__ = [
    "PersistenceConfig",
    "LoopStatePersistence",
    "StateNotFoundError",
    "saved_state",
]

_EXTENSIONS = {"json": ".json", "markdown": ".md"}
_PREFIX = "loop_state_"


class StateNotFoundError(PersistenceError, FileNotFoundError):
    """No snapshot is stored for the trace id asked for."""


@dataclass
class PersistenceConfig:
    """Where and how states are stored.

    ``save_interval``/``auto_save`` are for callers that save on their own
    schedule (``is_due``); the engine saves at every boundary regardless, so
    a resumed run never loses an iteration. ``max_history`` is the number of snapshots kept per trace besides the
    current file (0 keeps none); ``durable=False`` skips fsync (tests, scratch).
    """

    state_dir: str | Path = "loop_state"
    format: str = "markdown"
    auto_save: bool = True
    save_interval: int = 1
    max_history: int = 10
    durable: bool = True

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)
        if self.format not in _EXTENSIONS:
            raise ConfigurationError(f"format must be 'markdown' or 'json', got {self.format!r}")
        if isinstance(self.save_interval, bool) or not isinstance(self.save_interval, int) or self.save_interval < 1:
            raise ConfigurationError(f"save_interval must be an int >= 1, got {self.save_interval!r}")
        if isinstance(self.max_history, bool) or not isinstance(self.max_history, int) or self.max_history < 0:
            raise ConfigurationError(f"max_history must be an int >= 0, got {self.max_history!r}")

    def is_due(self, iteration: int) -> bool:
        """Whether an automatic save belongs at this iteration boundary."""
        return self.auto_save and iteration % self.save_interval == 0


class LoopStatePersistence:
    """Save and load ``LoopState`` snapshots keyed by trace id."""

    def __init__(self, config: PersistenceConfig | None = None) -> None:
        self.config = config if config is not None else PersistenceConfig()
        self._last_seq: dict[str, int] = {}

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir)

    def path_for(self, trace_id: str, format: str | None = None) -> Path:
        ext = _EXTENSIONS[format or self.config.format]
        return self.state_dir / f"{_PREFIX}{validate_trace_id(trace_id)}{ext}"

    # --- save -----------------------------------------------------------------

    def save(self, state: LoopState, trace_id: str | None = None) -> Path:
        """Write ``state`` atomically and return the file's path.

        Without ``trace_id`` the state's own is used, and a state without one
        is given a new unique id (``state.trace_id`` is set, so later saves of
        the run land in the same file). Values that are not JSON raise
        ``NotJSONSerialisableError`` naming them, before anything is written.
        """
        if trace_id is None:
            if state.trace_id is None:
                state.trace_id = new_trace_id()
            trace_id = state.trace_id
        path = self.path_for(trace_id)
        if self.config.format == "json":
            data = encode_state(state)
        else:
            # an audit is for reading: a lone surrogate shows as \udxxx rather than failing the save
            data = render_state_markdown(state, trace_id).encode("utf-8", "backslashreplace")
        atomic_write_bytes(path, data, durable=self.config.durable)
        if self.config.max_history:
            self._keep_history(trace_id, path)
        return path

    def _history_dir(self, trace_id: str) -> Path:
        return self.state_dir / "history" / trace_id

    def _keep_history(self, trace_id: str, path: Path) -> None:
        """Hard-link the file just written as the next snapshot, and drop the oldest.

        A link shares the bytes that were already written and fsynced, so a
        snapshot costs a directory entry, not a second copy of the state.
        """
        directory, keep = self._history_dir(trace_id), self.config.max_history
        ext = _EXTENSIONS[self.config.format]
        last = self._last_seq.get(trace_id)
        if last is None:
            # First save of this trace by this object: learn the sequence from
            # the trace's own history (at most max_history files), never the state dir.
            existing = [int(p.stem) for p in self.list_history(trace_id)]
            last = max(existing, default=0)
            stale = [seq for seq in existing if seq <= last + 1 - keep]
        else:
            stale = [last + 1 - keep]
        seq = last + 1
        snapshot = directory / f"{seq:08d}{ext}"
        if not directory.is_dir():
            make_directories(directory, durable=self.config.durable)
        snapshot.unlink(missing_ok=True)  # left by an earlier object that lost count
        try:
            os.link(path, snapshot)
        except OSError:  # a filesystem without hard links: pay for a copy
            atomic_write_bytes(snapshot, path.read_bytes(), durable=self.config.durable)
        else:
            if self.config.durable:
                fsync_directory(directory)
        self._last_seq[trace_id] = seq
        for old in stale:
            if old > 0:
                (directory / f"{old:08d}{ext}").unlink(missing_ok=True)

    def list_history(self, trace_id: str) -> list[Path]:
        """The kept snapshots of one trace, oldest first."""
        directory = self._history_dir(validate_trace_id(trace_id))
        ext = _EXTENSIONS[self.config.format]
        return sorted(p for p in directory.glob(f"*{ext}") if p.stem.isdigit()) if directory.is_dir() else []

    # --- load -----------------------------------------------------------------

    def load(self, trace_id: str) -> LoopState:
        """The stored state of ``trace_id``; JSON in full, markdown header fields only."""
        path = self.path_for(trace_id)
        if not path.is_file():
            other = "markdown" if self.config.format == "json" else "json"
            hint = ""
            if self.path_for(trace_id, other).is_file():
                hint = f"; a {other} snapshot exists - load it with PersistenceConfig(format={other!r})"
            raise StateNotFoundError(
                f"no saved state for trace {trace_id!r} in {self.state_dir} (looked for {path.name}){hint}"
            )
        return self.load_path(path)

    def load_path(self, path: str | Path) -> LoopState:
        """Load one snapshot file (current or from history); the suffix picks the format."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise StateNotFoundError(f"state file {path} does not exist") from None
        if path.suffix == ".json":
            return self._from_json(path, raw)
        try:
            header = parse_audit_header(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptStateError(f"{path}: unreadable markdown state header ({exc})") from None
        if header is None:
            raise CorruptStateError(f"{path}: no loop_engine header; the file is truncated or not a loop state")
        return _state_from_header(path, header)

    @staticmethod
    def _from_json(path: Path, raw: bytes) -> LoopState:
        try:
            with gc_paused():
                document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:  # also raised for invalid UTF-8
            raise CorruptStateError(
                f"{path}: not a complete JSON state document ({exc}); it may be truncated - "
                "restore a snapshot from the history directory or delete the file"
            ) from None
        state = saved_state(path, document)
        try:
            return state_from_dict(state)
        except CorruptStateError as exc:
            raise CorruptStateError(f"{path}: {exc}") from None

    def list_saved_states(self) -> list[dict[str, Any]]:
        """Stored runs of the configured format, newest first (this one does scan the directory)."""
        ext = _EXTENSIONS[self.config.format]
        if not self.state_dir.is_dir():
            return []
        entries = []
        for path in self.state_dir.glob(f"{_PREFIX}*{ext}"):
            stat = path.stat()
            entries.append(
                {
                    "trace_id": path.name[len(_PREFIX) : -len(ext)],
                    "path": path,
                    "format": self.config.format,
                    "modified": datetime.fromtimestamp(stat.st_mtime),
                    "mtime_ns": stat.st_mtime_ns,
                    "size_bytes": stat.st_size,
                }
            )
        return sorted(entries, key=lambda e: (e["mtime_ns"], e["trace_id"]), reverse=True)

    def load_latest(self) -> LoopState | None:
        """The most recently saved state, or None when nothing is stored."""
        saved = self.list_saved_states()
        return self.load_path(saved[0]["path"]) if saved else None

    def delete(self, trace_id: str) -> bool:
        """Remove a trace's files (both formats) and its history; False if there were none."""
        removed = False
        for fmt in _EXTENSIONS:
            path = self.path_for(trace_id, fmt)
            if path.exists():
                path.unlink()
                removed = True
        history = self._history_dir(trace_id)
        if history.is_dir():
            shutil.rmtree(history)
            removed = True
        self._last_seq.pop(trace_id, None)
        return removed


def saved_state(where: object, document: Any) -> dict[str, Any]:
    """The state dict of a saved document (``{"schema_version": N, "state": {...}}``), its version checked.

    The one check of a saved state's version, for every keeper of these
    documents (this module's files, a bot's database): CorruptStateError or
    SchemaVersionError naming ``where``.
    """
    if not isinstance(document, dict) or "schema_version" not in document or not isinstance(
        document.get("state"), dict
    ):
        raise CorruptStateError(f"{where}: not a loop state document (needs 'schema_version' and a 'state' object)")
    version = document["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise CorruptStateError(f"{where}: schema_version {version!r} is not a positive integer")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where} was written with schema_version {version}, but this loop_engine reads "
            f"schema_version {SCHEMA_VERSION} and older; upgrade loop_engine to load it"
        )
    state: dict[str, Any] = document["state"]
    return state


def _state_from_header(path: Path, header: dict[str, Any]) -> LoopState:
    try:
        return LoopState(
            trace_id=header["trace_id"],
            status=decode_enum(LoopStatus, header["status"], "status"),
            execution_state=decode_enum(ExecutionState, header["execution_state"], "execution_state"),
            current_iteration=int(header["current_iteration"]),
            counters=dict(header["counters"]),
            stop_reason=header["stop_reason"],
            checkpoint_counter=int(header["checkpoint_counter"]),
            started_at=decode_datetime(header["started_at"], "started_at"),
            updated_at=decode_datetime(header["updated_at"], "updated_at"),
        )
    except KeyError as exc:
        raise CorruptStateError(f"{path}: header is missing {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise CorruptStateError(f"{path}: malformed header ({exc})") from None
