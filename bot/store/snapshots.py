"""Engine snapshots of runs: ``snapshots/<run id>.json``.

Format 2 (``save_state``) wraps the engine's own encoded bytes
(``loop_engine.serialization.encode_state``, orjson) in the store's
document by concatenation, so a save costs what the engine's own save
costs; ``json.dumps(indent=1, sort_keys=True)`` of the state dict took seven
times as long on a 1,000-step state. Format 1 (``save_snapshot``, the dict
API older callers use) is still written and read.

The engine's serialization (and its state types) is imported by the methods
that use it: listing runs and reviews, as `status` does, needs neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from loop_engine.errors import CorruptStateError

from .base import CorruptDocumentError, NewerFormatError, StoreError
from .documents import DocumentWriter, file_name, parse

if TYPE_CHECKING:  # pragma: no cover
    from loop_engine.types import LoopState

__all__ = ["SnapshotFiles", "SNAPSHOT_FORMAT"]

#: 1: {"snapshot": <state dict>}; 2: {"engine": <encode_state document>}.
SNAPSHOT_FORMAT = 2


class SnapshotFiles(DocumentWriter):
    """The snapshot half of ``FileStore`` (mixed in; ``root`` is the state dir)."""

    root: Path

    def _snapshot_path(self, run_id: str) -> Path:
        name = file_name(run_id)
        if name is None:
            raise StoreError(f"invalid run id {run_id!r}: use letters, digits, '-', '_' or '.' (e.g. demo-run-3)")
        return self.root / "snapshots" / f"{name}.json"

    def save_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None:
        """Save a state dict (``state_to_dict``); prefer ``save_state``, which skips the dict."""
        document = {"format": 1, "run_id": run_id, "snapshot": snapshot}
        self._write(self._snapshot_path(run_id), orjson.dumps(document) + b"\n")

    def save_state(self, run_id: str, state: LoopState) -> None:
        """Save the engine's state as the engine encodes it (NotJSONSerialisableError before any write)."""
        from loop_engine.serialization import encode_state

        path = self._snapshot_path(run_id)
        engine = encode_state(state)
        head = b'{"format":%d,"run_id":%b,"engine":' % (SNAPSHOT_FORMAT, orjson.dumps(run_id))
        self._write(path, b"".join((head, engine, b"}\n")))  # one copy of a large state, not two

    def _snapshot_document(self, run_id: str) -> tuple[Path, dict[str, Any]] | None:
        path = self._snapshot_path(run_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return path, parse(path, raw, SNAPSHOT_FORMAT)

    @staticmethod
    def _engine_state(path: Path, document: dict[str, Any]) -> dict[str, Any]:
        """The state dict inside a snapshot document of either format, checked like the engine's loader."""
        from loop_engine.serialization import SCHEMA_VERSION

        if document["format"] == 1:
            snapshot = document.get("snapshot")
            if not isinstance(snapshot, dict):
                raise CorruptDocumentError(f"{path}: damaged snapshot document (no 'snapshot' object); move it aside")
            return snapshot
        engine = document.get("engine")
        if not isinstance(engine, dict) or not isinstance(engine.get("state"), dict):
            raise CorruptDocumentError(f"{path}: damaged snapshot document (no engine state); move it aside")
        version = engine.get("schema_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise CorruptDocumentError(f"{path}: engine schema_version {version!r} is not a positive integer")
        if version > SCHEMA_VERSION:
            raise NewerFormatError(
                f"{path}: engine schema_version {version} is newer than this loopbot reads "
                f"(up to {SCHEMA_VERSION}); upgrade loopbot to use this state_dir"
            )
        state: dict[str, Any] = engine["state"]
        return state

    def load_snapshot(self, run_id: str) -> dict[str, Any] | None:
        """The saved state dict (either format), None if the run has none."""
        found = self._snapshot_document(run_id)
        return None if found is None else self._engine_state(*found)

    def load_state(self, run_id: str) -> LoopState | None:
        """The saved ``LoopState`` (either format), None if the run has none."""
        found = self._snapshot_document(run_id)
        if found is None:
            return None
        from loop_engine.serialization import state_from_dict

        path, document = found
        try:
            return state_from_dict(self._engine_state(path, document))
        except CorruptStateError as err:
            raise CorruptDocumentError(f"{path}: {err}; restore it or move it aside") from err
