"""Files as Slack takes them from ``files_upload_v2``: an upload URL, the bytes sent there, then completion.

A mixin of the fake Slack (``FakeSlackApi``): ``files.getUploadURLExternal``
(refused without the ``files:write`` scope) names an upload URL on the fake
itself; the bytes posted there are kept; ``files.completeUploadExternal``
checks that every file arrived whole and shares it into the channel or
thread as a message with ``files``, the way ``conversations.replies`` shows
it. ``uploaded()`` is what arrived.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

__all__ = ["BOT_USER", "FileUploads"]

BOT_USER = "U0BOT"


class FileUploads:
    """The three steps of ``files_upload_v2``; the fake provides the state named here."""

    files: dict[str, dict[str, Any]]
    scopes: list[str] | None
    _lock: threading.Lock

    @property
    def base_url(self) -> str:  # pragma: no cover - the fake's own
        raise NotImplementedError

    def _store(self, channel: str, message: dict[str, Any]) -> dict[str, Any]:  # pragma: no cover - the fake's own
        raise NotImplementedError

    def uploaded(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The files completed into ``channel`` (every channel: None), with their content as text."""
        with self._lock:
            done = [dict(f) for f in self.files.values() if f.get("channel") and channel in (None, f["channel"])]
        return [{**f, "text": bytes(f.get("content") or b"").decode("utf-8")} for f in done]

    def _get_upload_url(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.scopes is not None and "files:write" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "files:write"}
        filename, length = str(params.get("filename") or ""), str(params.get("length") or "")
        if not filename or not length.isdigit():
            return {"ok": False, "error": "invalid_arguments"}
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.files[file_id] = {"id": file_id, "filename": filename, "length": int(length)}
        upload_url = self.base_url.replace("/api/", f"/upload/v1/{file_id}")
        return {"ok": True, "upload_url": upload_url, "file_id": file_id}

    def _complete_upload(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.scopes is not None and "files:write" not in self.scopes:
            return {"ok": False, "error": "missing_scope", "needed": "files:write"}
        listed = params.get("files")
        if not isinstance(listed, list) or not listed:
            return {"ok": False, "error": "invalid_arguments"}
        channel, thread_ts = str(params.get("channel_id") or ""), str(params.get("thread_ts") or "")
        shared = []
        for item in listed:
            found = self.files.get(str(item.get("id")))
            if found is None or found.get("content") is None or len(found["content"]) != found["length"]:
                return {"ok": False, "error": "file_not_found"}
            found.update(title=str(item.get("title") or found["filename"]), channel=channel, thread_ts=thread_ts)
            shared.append({"id": found["id"], "name": found["filename"], "title": found["title"]})
        if channel:
            message: dict[str, Any] = {"text": "", "user": BOT_USER, "files": shared, "upload": True}
            if thread_ts:
                message["thread_ts"] = thread_ts
            self._store(channel, message)
        return {"ok": True, "files": [{"id": f["id"], "title": f["title"]} for f in shared]}

    def _receive_upload(self, path: str, body: bytes) -> tuple[int, str]:
        file_id = path.rsplit("/", 1)[-1]
        with self._lock:
            found = self.files.get(file_id)
            if found is None:
                return 404, "not found"
            found["content"] = body
        return 200, f"OK - {len(body)}"
