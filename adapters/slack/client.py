"""Which Slack Web API calls does loopbot make, and what does a failure mean? ``SlackClient``.

A thin wrapper over slack_sdk's sync ``WebClient`` with only the calls the
channel, the directory and ``loopbot check`` need. It does not sleep
through rate limits: the bot's outbox retries with backoff, so a 429
becomes ``ChannelError(retry_after=Retry-After)`` (clamped: ``adapters.waits``), a 5xx or a network error
a transient ``ChannelError``, and errors no retry can fix (the bot is not
in the channel, a missing scope, a bad token) a ``ChannelError(permanent=True)``
whose message says what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler
from slack_sdk.web import SlackResponse
from slack_sdk.webhook import WebhookClient

from adapters.channel import ChannelError
from adapters.waits import parse_wait

__all__ = ["DEFAULT_API_BASE_URL", "SlackClient", "channel_error"]

log = logging.getLogger(__name__)

DEFAULT_API_BASE_URL = "https://slack.com/api/"

#: ``ok: false`` errors that a later retry may get past.
_TRANSIENT = {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited",
              "team_added_to_org"}
_AUTH = {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "no_permission"}


def _advice(error: str, method: str, params: Mapping[str, Any], needed: str) -> str:
    channel = params.get("channel") or "?"
    if error == "channel_not_found":
        return (f"Slack channel {channel} was not found by {method}: use the channel id (e.g. C0123ABC) in "
                f"review.post_to, and invite the bot if the channel is private (/invite @loopbot)")
    if error == "not_in_channel":
        return f"the bot is not in Slack channel {channel}: invite it there with /invite @loopbot"
    if error == "is_archived":
        return f"Slack channel {channel} is archived: unarchive it or point review.post_to at another channel"
    if error == "missing_scope":
        return (f"the Slack app lacks the scope {needed or '?'} that {method} needs: add it under OAuth & "
                f"Permissions (see slack-manifest.yaml) and reinstall the app")
    if error in _AUTH:
        return f"Slack refused slack.bot_token ({error}) on {method}: check the token (xoxb-...) and the app install"
    return f"Slack refused {method}: {error}"


def channel_error(exc: SlackApiError | SlackClientError | OSError, method: str,
                  params: Mapping[str, Any] | None = None) -> ChannelError:
    """A slack_sdk failure as the outbox understands it: retry_after, transient, or permanent with advice."""
    params = params or {}
    if not isinstance(exc, SlackApiError):
        return ChannelError(f"cannot reach Slack for {method}: {exc}")
    response = exc.response
    status = getattr(response, "status_code", 200)
    headers = {str(k).lower(): v for k, v in (getattr(response, "headers", None) or {}).items()}
    data = response.data if isinstance(getattr(response, "data", None), dict) else {}
    error = str(data.get("error", "") or "")
    if status == 429 or error == "ratelimited":
        wait = parse_wait(headers.get("retry-after"))  # finite and bounded: "inf" once stopped a channel
        wait = 1.0 if wait is None else wait
        return ChannelError(f"Slack rate-limited {method}; retry after {wait:g}s", retry_after=wait)
    if status >= 500:
        return ChannelError(f"Slack answered HTTP {status} to {method}; will retry")
    if error in _TRANSIENT:
        return ChannelError(f"Slack had a temporary problem with {method} ({error})")
    needed = str(data.get("needed", "") or "")
    return ChannelError(_advice(error or f"HTTP {status}", method, params, needed), permanent=True)


class SlackClient:
    """The Slack Web API calls loopbot makes, each raising ``ChannelError`` on failure.

    ``SlackClient(token, base_url=...)`` builds its own ``WebClient`` (one
    connection-error retry, no rate-limit sleeping); ``web=`` takes one you
    built. ``base_url`` points tests at a fake.
    """

    def __init__(self, token: str = "", *, base_url: str = DEFAULT_API_BASE_URL, timeout: int = 15,
                 web: WebClient | None = None) -> None:
        if not base_url.endswith("/"):
            base_url += "/"
        self.web = web or WebClient(token=token, base_url=base_url, timeout=timeout,
                                    retry_handlers=[ConnectionErrorRetryHandler(max_retry_count=1)])

    def _call(self, method: str, **params: Any) -> SlackResponse:
        """``chat.*`` as a JSON body (blocks and metadata stay structured), the rest as a form."""
        json_body = method.startswith("chat.") or method == "views.open"
        try:
            return self.web.api_call(method, json=params if json_body else None, data=None if json_body else params)
        except (SlackApiError, SlackClientError, URLError, OSError) as exc:
            raise channel_error(exc, method, params) from exc

    @staticmethod
    def _data(response: SlackResponse) -> dict[str, Any]:
        return dict(response.data) if isinstance(response.data, dict) else {}

    # --- chat -------------------------------------------------------------------
    def post_message(self, channel: str, text: str, *, blocks: list[dict[str, Any]] | None = None,
                     thread_ts: str | None = None, reply_broadcast: bool = False,
                     metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"channel": channel, "text": text, "unfurl_links": False}
        if blocks is not None:
            params["blocks"] = blocks
        if thread_ts:
            params["thread_ts"] = thread_ts
            if reply_broadcast:
                params["reply_broadcast"] = True
        if metadata is not None:
            params["metadata"] = metadata
        return self._data(self._call("chat.postMessage", **params))

    def update_message(self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None,
                       metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"channel": channel, "ts": ts, "text": text}
        if blocks is not None:
            params["blocks"] = blocks
        if metadata is not None:
            params["metadata"] = metadata
        return self._data(self._call("chat.update", **params))

    def post_ephemeral(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> None:
        params: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread_ts:
            params["thread_ts"] = thread_ts
        self._call("chat.postEphemeral", **params)

    def respond(self, response_url: str, text: str) -> None:
        """An ephemeral follow-up through a slash command's or action's ``response_url``."""
        try:
            result = WebhookClient(response_url, timeout=15).send(text=text, response_type="ephemeral",
                                                                  replace_original=False)
        except (URLError, OSError) as exc:
            raise ChannelError(f"cannot reach the response_url: {exc}") from exc
        if result.status_code == 429 or result.status_code >= 500:
            raise ChannelError(f"the response_url answered HTTP {result.status_code}")
        if result.status_code >= 400:
            raise ChannelError(f"the response_url refused the answer (HTTP {result.status_code}: {result.body}); "
                               "it expires 30 minutes after the command", permanent=True)

    def upload_file(self, channel: str, thread_ts: str, *, filename: str, title: str, content: str) -> None:
        """A file in a thread (``files_upload_v2``: an upload URL, the bytes, complete); needs ``files:write``."""
        method = "files.completeUploadExternal"
        try:
            self.web.files_upload_v2(channel=channel, thread_ts=thread_ts, filename=filename, title=title,
                                     content=content.encode("utf-8"))
        except SlackApiError as exc:
            raise channel_error(exc, exc.response.api_url.rsplit("/", 1)[-1] or method, {"channel": channel}) from exc
        except (SlackClientError, URLError, OSError) as exc:  # the upload URL refused the bytes, or no network
            raise channel_error(exc, method, {"channel": channel}) from exc

    def add_reaction(self, channel: str, ts: str, name: str) -> None:
        try:
            self.web.api_call("reactions.add", data={"channel": channel, "timestamp": ts, "name": name})
        except SlackApiError as exc:
            if exc.response.get("error") == "already_reacted":
                return
            raise channel_error(exc, "reactions.add", {"channel": channel}) from exc
        except (SlackClientError, URLError, OSError) as exc:
            raise channel_error(exc, "reactions.add", {"channel": channel}) from exc

    # --- reading -------------------------------------------------------------------
    def _pages(self, method: str, key: str, max_pages: int, **params: Any) -> Iterator[dict[str, Any]]:
        cursor = ""
        for _ in range(max_pages):
            data = self._data(self._call(method, **params, **({"cursor": cursor} if cursor else {})))
            yield from data.get(key) or []
            cursor = str((data.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                return

    def history(self, channel: str, *, limit: int = 200, max_pages: int = 5) -> Iterator[dict[str, Any]]:
        """The channel's top-level messages, newest first, with their metadata."""
        return self._pages("conversations.history", "messages", max_pages, channel=channel, limit=limit,
                           include_all_metadata=True)

    def replies(
        self, channel: str, thread_ts: str, *, limit: int = 200, max_pages: int = 5
    ) -> Iterator[dict[str, Any]]:
        """A thread, parent first, with metadata."""
        return self._pages("conversations.replies", "messages", max_pages, channel=channel, ts=thread_ts,
                           limit=limit, include_all_metadata=True)

    def channel_members(self, channel: str, *, max_pages: int = 100) -> list[str]:
        """Every member of ``channel`` (``conversations.members``, 1,000 a page, followed by its cursor)."""
        return [str(user) for user in self._pages("conversations.members", "members", max_pages, channel=channel,
                                                  limit=1000)]

    def usergroup_members(self, usergroup: str) -> list[str]:
        data = self._data(self._call("usergroups.users.list", usergroup=usergroup))
        return [str(user) for user in data.get("users") or []]

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> dict[str, Any]:
        return self._data(self._call("views.open", trigger_id=trigger_id, view=view))

    def identity(self) -> tuple[dict[str, Any], frozenset[str] | None]:
        """``auth.test``'s answer and the scopes the token holds (from ``x-oauth-scopes``; None if absent)."""
        response = self._call("auth.test")
        headers = {str(k).lower(): v for k, v in (response.headers or {}).items()}
        raw = headers.get("x-oauth-scopes")
        if isinstance(raw, list):
            raw = ",".join(raw)
        scopes = None if raw is None else frozenset(s.strip() for s in str(raw).split(",") if s.strip())
        return self._data(response), scopes

    def probe_channel(self, channel: str) -> None:
        """Can the bot read ``channel`` (it must be a member to find its own messages there)?"""
        self._call("conversations.history", channel=channel, limit=1)
