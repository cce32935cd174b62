"""The fake Slack's Web API methods, as strict as Slack: its limits, pages, refusals and errors.

A mixin of ``FakeSlackApi`` (slack_api.py), which owns the state it reads
and writes (``messages``, ``members``, ``usergroups``, ``scopes``,
``refused``) and calls ``answer`` under its lock for each request the HTTP
server (slack_http.py) received. A message Slack would refuse
(``invalid_blocks``, ``msg_blocks_too_long``: slack_blocks.py) is answered so
and kept in ``refused``; files go through ``FileUploads`` (slack_files.py).
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from .slack_blocks import block_problem
from .slack_files import BOT_USER, FileUploads

__all__ = ["SlackMethods", "TEAM", "truthy"]

TEAM = "T0TEAM"


def truthy(value: Any) -> bool:
    """A flag as slack_sdk sends it: a JSON true, or the text of one in a form body."""
    return value in (True, 1, "1", "true", "True")


class SlackMethods(FileUploads):
    """``answer(method, params)``: Slack's reply to one Web API call; the fake provides the state named here."""

    messages: dict[str, list[dict[str, Any]]]
    members: dict[str, list[str]]
    usergroups: dict[str, list[str]]
    refused: list[tuple[str, str, str]]
    socket_url: str | None
    _ts: itertools.count[int]

    def _next_ts(self) -> str:
        return f"{1_700_000_000 + next(self._ts)}.000100"

    def _store(self, channel: str, message: dict[str, Any]) -> dict[str, Any]:
        message = {"type": "message", "ts": self._next_ts(), **message}
        self.messages.setdefault(channel, []).append(message)
        return message

    def _find(self, channel: str, ts: str) -> dict[str, Any] | None:
        return next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)

    @staticmethod
    def _shown(message: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        shown = dict(message)
        if not truthy(params.get("include_all_metadata")):
            shown.pop("metadata", None)
        return shown

    def _page(self, found: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
        limit = int(params.get("limit") or 100)
        start = int(params.get("cursor") or 0)
        page = found[start:start + limit]
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": [self._shown(m, params) for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _members(self, channel: str, params: dict[str, Any]) -> dict[str, Any]:
        """``conversations.members`` as Slack pages it: ``limit`` (at most 1,000) per page, an opaque cursor."""
        if self.scopes is not None and not {"channels:read", "groups:read"} & set(self.scopes):
            return {"ok": False, "error": "missing_scope", "needed": "channels:read,groups:read"}
        if channel not in self.members:
            return {"ok": False, "error": "channel_not_found"}
        limit = int(params.get("limit") or 100)
        if not 1 <= limit <= 1000:
            return {"ok": False, "error": "invalid_limit"}
        cursor = str(params.get("cursor") or "")
        try:
            start = int(cursor.removeprefix("dXNlcjo")) if cursor else 0
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        users = self.members[channel]
        more = start + limit < len(users)
        return {"ok": True, "members": list(users[start:start + limit]),
                "response_metadata": {"next_cursor": f"dXNlcjo{start + limit}" if more else ""}}

    def _refuse(self, method: str, error: str, detail: str) -> dict[str, Any]:
        self.refused.append((method, error, detail))
        return {"ok": False, "error": error, "response_metadata": {"messages": [f"[ERROR] {detail}"]}}

    def _check_blocks(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """Slack's answer to a message it would refuse (``invalid_blocks``, ``msg_blocks_too_long``), else None."""
        blocks = params.get("blocks")
        if blocks is None:
            return None
        problem = block_problem(blocks)
        if problem is not None:
            return self._refuse(method, *problem)
        return None

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:  # noqa: C901 - one branch per method
        channel = str(params.get("channel", ""))
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            refused = self._check_blocks(method, params)
            if refused is not None:
                return refused
        if method == "files.getUploadURLExternal":
            return self._get_upload_url(params)
        if method == "files.completeUploadExternal":
            return self._complete_upload(params)
        if method == "auth.test":
            return {"ok": True, "url": "https://test.slack.com/", "team": "Test Team", "user": "loopbot",
                    "team_id": TEAM, "user_id": BOT_USER, "bot_id": "B0BOT"}
        if method == "chat.postMessage":
            message: dict[str, Any] = {"text": params.get("text", ""), "bot_id": "B0BOT", "user": BOT_USER}
            for key in ("blocks", "metadata", "thread_ts"):
                if params.get(key) is not None:
                    message[key] = params[key]
            if truthy(params.get("reply_broadcast")):
                message["subtype"] = "thread_broadcast"
            stored = self._store(channel, message)
            if "thread_ts" in message:
                parent = self._find(channel, message["thread_ts"])
                if parent is not None:
                    parent["thread_ts"] = parent["ts"]
                    parent["reply_count"] = parent.get("reply_count", 0) + 1
            return {"ok": True, "channel": channel, "ts": stored["ts"], "message": dict(stored)}
        if method == "chat.update":
            target = self._find(channel, str(params.get("ts")))
            if target is None:
                return {"ok": False, "error": "message_not_found"}
            for key in ("text", "blocks", "metadata"):
                if params.get(key) is not None:
                    target[key] = params[key]
            target["edited"] = {"user": BOT_USER}
            return {"ok": True, "channel": channel, "ts": target["ts"], "text": target.get("text", "")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "conversations.history":
            top = [m for m in self.messages.get(channel, [])
                   if m.get("thread_ts") in (None, m["ts"]) or m.get("subtype") == "thread_broadcast"]
            return self._page(list(reversed(top)), params)  # newest first, as Slack answers
        if method == "conversations.replies":
            ts = str(params.get("ts"))
            parent = self._find(channel, ts)
            if parent is None:
                return {"ok": False, "error": "thread_not_found"}
            thread = [parent] + [
                m for m in self.messages.get(channel, []) if m.get("thread_ts") == ts and m is not parent
            ]
            return self._page(thread, params)
        if method == "reactions.add":
            return {"ok": True}
        if method == "conversations.members":
            return self._members(channel, params)
        if method == "usergroups.users.list":
            group = str(params.get("usergroup", ""))
            if group not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(self.usergroups[group])}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{uuid.uuid4().hex[:8].upper()}", **(params.get("view") or {})}}
        if method == "apps.connections.open":
            if self.socket_url is None:
                return {"ok": False, "error": "socket_mode_not_enabled"}
            return {"ok": True, "url": self.socket_url}
        if method == "response_url":
            return {"ok": True}
        return {"ok": False, "error": "unknown_method"}
