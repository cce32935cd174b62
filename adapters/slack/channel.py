"""Where in Slack does a review go? ``SlackChannel``: one thread per run, one reply per review.

Each run gets ONE parent message in the target channel ("<loop> run <id>
started"), carrying message metadata ``loopbot_run {run_id}``; each review
is a reply in that thread with ``loopbot_review {review_id}`` and the
buttons. Before posting, the channel looks for its own earlier message
(``conversations.history`` / ``replies`` with ``include_all_metadata``), so
the outbox's retry after a crash finds the first message instead of posting
twice; an in-process cache saves the lookups on the happy path. Updates
(reminders, the outcome, the run's end) are thread replies, tagged the same
way so that they too are posted once; once the review is no longer open the
review message is re-rendered without buttons and with the outcome on top.

A message too long for Slack's limits arrives whole all the same
(``render``): the review's proposal goes on in further replies tagged
``loopbot_more {review_id, part}`` or in files uploaded to the thread
(``files_upload_v2``), an update in replies tagged with its part; a retry
finds the parts already there and posts only the missing ones.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from adapters.channel import Answer, ChannelError, MessageRef, ReviewPost, Target

from .mrkdwn import is_outcome, render_answer
from .limits import cut
from .render import RenderedMessage, render_escalation, render_review, render_run_parent, render_update

__all__ = ["ChatApi", "SlackChannel", "EVENT_RUN", "EVENT_REVIEW", "EVENT_UPDATE", "EVENT_ESCALATION", "EVENT_MORE"]

log = logging.getLogger(__name__)

EVENT_RUN = "loopbot_run"
EVENT_REVIEW = "loopbot_review"
EVENT_UPDATE = "loopbot_update"
EVENT_ESCALATION = "loopbot_escalation"
EVENT_MORE = "loopbot_more"
#: How much of an outcome the review message's metadata keeps (to show it again on a later re-render).
_STORED_OUTCOME = 2000


class ChatApi(Protocol):
    """The Slack calls a channel makes (``SlackClient`` implements them; each raises ChannelError)."""

    def post_message(self, channel: str, text: str, *, blocks: list[dict[str, Any]] | None = None,
                     thread_ts: str | None = None, reply_broadcast: bool = False,
                     metadata: dict[str, Any] | None = None) -> dict[str, Any]: ...

    def update_message(self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None,
                       metadata: dict[str, Any] | None = None) -> dict[str, Any]: ...

    def post_ephemeral(self, channel: str, user: str, text: str, *, thread_ts: str | None = None) -> None: ...

    def respond(self, response_url: str, text: str) -> None: ...

    def history(self, channel: str) -> Iterator[dict[str, Any]]: ...

    def replies(self, channel: str, thread_ts: str) -> Iterator[dict[str, Any]]: ...

    def upload_file(self, channel: str, thread_ts: str, *, filename: str, title: str, content: str) -> None: ...


def _metadata(event_type: str, **payload: str) -> dict[str, Any]:
    return {"event_type": event_type, "event_payload": payload}


def _tagged(message: Mapping[str, Any], event_type: str, **payload: str) -> bool:
    """Is this a message of ours with this metadata?"""
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != event_type:
        return False
    found = metadata.get("event_payload") or {}
    return all(found.get(key) == value for key, value in payload.items())


def _update_part(message: Mapping[str, Any], review_id: str, digest: str, part: int) -> bool:
    """Is this part ``part`` of the update with ``digest``? (A first part carries no part number.)"""
    if not _tagged(message, EVENT_UPDATE, review_id=review_id, digest=digest):
        return False
    found = ((message.get("metadata") or {}).get("event_payload") or {}).get("part")
    return str(found or "1") == str(part)


def _digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:16]


class SlackChannel:
    """The ``Channel`` of Slack (``name == "slack"``).

    ``broadcast`` also shows each review in the channel (``reply_broadcast``);
    ``command`` is the slash command named in the how-to-answer line.
    """

    name = "slack"

    def __init__(self, client: ChatApi, *, broadcast: bool = False, command: str = "/loopbot") -> None:
        self.client = client
        self.broadcast = broadcast
        self.command = command
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._parents: dict[tuple[str, str], tuple[str, str]] = {}  # (target channel, run) -> (channel id, ts)
        self._posted: dict[tuple[str, str, str], str] = {}  # (event type, channel id, review) -> ts

    # --- helpers ---------------------------------------------------------------------
    def _lock(self, channel: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(channel, threading.Lock())

    @staticmethod
    def _channel(target: Target) -> str:
        if target.kind != "slack" or not target.channel:
            raise ChannelError(f"the slack channel cannot post to a {target.kind!r} target", permanent=True)
        return target.channel

    def _find(self, messages: Iterator[dict[str, Any]], event_type: str, **payload: str) -> dict[str, Any] | None:
        return next((m for m in messages if _tagged(m, event_type, **payload)), None)

    def _run_parent(self, channel: str, post: ReviewPost) -> tuple[str, str]:
        """(channel id, ts) of the run's parent message: cached, found in history, or posted now."""
        cached = self._parents.get((channel, post.run_id))
        if cached is not None:
            return cached
        found = self._find(self.client.history(channel), EVENT_RUN, run_id=post.run_id)
        if found is not None:
            parent = (channel, str(found["ts"]))
        else:
            message = render_run_parent(post.loop, post.run_id)
            result = self.client.post_message(channel, message.text, blocks=message.blocks,
                                              metadata=_metadata(EVENT_RUN, run_id=post.run_id, loop=post.loop))
            parent = (str(result.get("channel") or channel), str(result["ts"]))
        self._parents[(channel, post.run_id)] = parent
        return parent

    # --- Channel -------------------------------------------------------------------------
    def post_request(self, target: Target, post: ReviewPost) -> MessageRef:
        """The review as a reply in its run's thread; a repeat returns the first message's ref."""
        channel = self._channel(target)
        with self._lock(channel):
            channel_id, parent_ts = self._run_parent(channel, post)
            key = (EVENT_REVIEW, channel_id, post.review_id)
            ts = self._posted.get(key)
            if ts is None:
                thread = list(self.client.replies(channel_id, parent_ts))
                found = self._find(iter(thread), EVENT_REVIEW, review_id=post.review_id)
                message = render_review(post, command=self.command)
                if found is not None:
                    ts = str(found["ts"])
                else:
                    result = self.client.post_message(
                        channel_id, message.text, blocks=message.blocks, thread_ts=parent_ts,
                        reply_broadcast=self.broadcast,
                        metadata=_metadata(EVENT_REVIEW, review_id=post.review_id, run_id=post.run_id),
                    )
                    ts = str(result["ts"])
                self._post_rest(channel_id, parent_ts, post.review_id, message, thread)
                self._posted[key] = ts
        return MessageRef(self.name, {"channel": channel_id, "ts": ts, "thread_ts": parent_ts}, target.key)

    def post_update(self, ref: MessageRef, post: ReviewPost, text: str) -> None:
        """Reply ``text`` in the thread (once); once not open, re-render the review without buttons."""
        if ref.channel != self.name:
            raise ChannelError(f"the slack channel cannot update a {ref.channel!r} message", permanent=True)
        try:
            channel, ts = str(ref.data["channel"]), str(ref.data["ts"])
        except KeyError:
            raise ChannelError(f"a slack message reference needs channel and ts, got {ref.data!r}",
                               permanent=True) from None
        thread_ts = str(ref.data.get("thread_ts") or ts)
        event_type = str(ref.data.get("event_type") or EVENT_REVIEW)
        digest = _digest(text)
        with self._lock(channel):
            thread = list(self.client.replies(channel, thread_ts))
            if post.status != "open":
                outcome = text.strip() if is_outcome(text) else self._stored_outcome(thread, ts)
                message = render_review(post, outcome, command=self.command)
                payload = {"review_id": post.review_id, "run_id": post.run_id}
                if outcome:
                    payload["outcome"] = cut(outcome, _STORED_OUTCOME)
                self.client.update_message(channel, ts, message.text, blocks=message.blocks,
                                           metadata=_metadata(event_type, **payload))
            if text.strip():
                reply = render_update(text)
                for part, piece in enumerate((reply, *reply.more), 1):
                    if any(_update_part(m, post.review_id, digest, part) for m in thread):
                        continue
                    tag = {"part": str(part)} if part > 1 else {}
                    self.client.post_message(channel, piece.text, blocks=piece.blocks, thread_ts=thread_ts,
                                             metadata=_metadata(EVENT_UPDATE, review_id=post.review_id,
                                                                digest=digest, **tag))

    def _post_rest(self, channel: str, thread_ts: str, review_id: str, message: RenderedMessage,
                   thread: list[dict[str, Any]]) -> None:
        """The replies and files that carry on ``message``, each posted unless the thread already has it."""
        for part, piece in enumerate(message.more, 1):
            if not any(_tagged(m, EVENT_MORE, review_id=review_id, part=str(part)) for m in thread):
                self.client.post_message(channel, piece.text, blocks=piece.blocks, thread_ts=thread_ts,
                                         metadata=_metadata(EVENT_MORE, review_id=review_id, part=str(part)))
        uploaded = {str(f.get("title")) for m in thread for f in (m.get("files") or []) if isinstance(f, dict)}
        for file in message.files:
            if file.title not in uploaded:
                self.client.upload_file(channel, thread_ts, filename=file.filename, title=file.title,
                                        content=file.content)

    @staticmethod
    def _stored_outcome(thread: list[dict[str, Any]], ts: str) -> str | None:
        """The outcome an earlier update wrote into the review message's metadata, so a later one keeps it."""
        message = next((m for m in thread if str(m.get("ts")) == ts), None)
        payload = ((message or {}).get("metadata") or {}).get("event_payload") or {}
        outcome = payload.get("outcome")
        return str(outcome) if outcome else None

    def post_escalation(self, target: Target, post: ReviewPost, text: str) -> MessageRef:
        """A new top-level message with ``text`` on top of the review; its thread takes @-mention answers too."""
        channel = self._channel(target)
        with self._lock(channel):
            key = (EVENT_ESCALATION, channel, post.review_id)
            ts = self._posted.get(key)
            channel_id = channel
            if ts is None:
                found = self._find(self.client.history(channel), EVENT_ESCALATION, review_id=post.review_id)
                message = render_escalation(post, text, command=self.command)
                if found is not None:
                    ts = str(found["ts"])
                else:
                    result = self.client.post_message(
                        channel, message.text, blocks=message.blocks,
                        metadata=_metadata(EVENT_ESCALATION, review_id=post.review_id, run_id=post.run_id),
                    )
                    ts, channel_id = str(result["ts"]), str(result.get("channel") or channel)
                if message.more or message.files:
                    self._post_rest(channel_id, ts, post.review_id, message,
                                    list(self.client.replies(channel_id, ts)))
                self._posted[key] = ts
        data = {"channel": channel_id, "ts": ts, "thread_ts": ts, "event_type": EVENT_ESCALATION}
        return MessageRef(self.name, data, target.key)

    def answer(self, respond: Mapping[str, Any], answer: Answer) -> None:
        """An ephemeral message to the sender (channel + user), else a post to the response_url."""
        text = render_answer(answer)
        channel, user = respond.get("channel"), respond.get("user")
        if channel and user:
            thread_ts = respond.get("thread_ts")
            try:
                self.client.post_ephemeral(str(channel), str(user), text,
                                           thread_ts=str(thread_ts) if thread_ts else None)
                return
            except ChannelError as exc:
                if not (exc.permanent and respond.get("response_url")):
                    raise
                # e.g. a slash command in a channel the bot is not in: the response_url still works
        if respond.get("response_url"):
            self.client.respond(str(respond["response_url"]), text)
        else:
            raise ChannelError(f"nowhere to answer in Slack: {dict(respond)!r} has no channel+user or response_url",
                               permanent=True)
