"""How does an answer come in from Slack? A Bolt ``AsyncApp`` that turns it into a ``Reply``.

Four ways in, one way on: the slash command (``/loopbot approve triage-17``,
also ``status`` and ``help``), the review's buttons, the Reject / Modify
modals, and ``@loopbot approve`` in a review's thread. Each becomes a
``Reply`` handed to the bot's handler (sync: it runs on threads of the event loop's pool, each
reply checked on its own and the votes checked meanwhile cast together, see ``VoteBatches``); the
``Answer`` it returns goes back to the sender as an ephemeral message. This
module never decides anything.

Acknowledgements: Slack wants one within 3 s, and an acknowledged vote must
not be lost. So every vote (slash command, button, modal, @-mention) is cast
first and acked once it is stored, waiting up to ``answer_wait`` seconds: a
slash command is acked with the answer itself, a click, a submission or an
event with an empty 200 and the answer follows as an ephemeral message. Only
a vote that takes longer than ``answer_wait`` is acked before it is stored
(a slash command with "working on it"), so Slack does not show the voter a
failure or retry the event; its answer still follows. A vote that could not
be stored (a full disk) is answered "not recorded, try again", never a
silent 200. Bolt sends the acknowledgement as soon as a listener returns
(``process_before_response``): whatever follows the ack runs on as a task of
its own (``_after_ack``). Without it Bolt ran every listener as a task and
polled for its ack every 10 ms, which cost each vote a tick and a timer.

Duplicates: Events API retries carry the first delivery's ``event_id``, so
``slack:event:<event_id>`` makes a retry count once (and its answer is not
repeated). A double click sends two ``block_actions`` with different
``action_ts``; keying on ``action_ts`` would count both, keying on (message,
user, button) alone would swallow a deliberate second ``Pause`` an hour later.
So clicks of the same button on the same message by the same person within
``click_window`` seconds share the first click's key (``ClickKeys``).

Bots: an event written by a bot (``bot_id`` set, or a ``bot_message``) is
never a vote - another app's bot @-mentioning loopbot in a thread decides
nothing, and loopbot never hears itself.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.channel import Answer, AnswerKind, Identity, Reply
from adapters.command_error import CommandError
from adapters.commands import Command, parse_command
from adapters.vote_batches import VoteBatches, VoteStages, VotesHandler
from loop_engine.checkpoint import HumanDecision

from .client import DEFAULT_API_BASE_URL
from .modals import (
    FIELD_BLOCK,
    MAX_ERROR,
    MODAL_CALLBACKS,
    ModalContext,
    build_modal,
    command_from_submission,
    submitted_text,
)
from .mrkdwn import render_answer
from .render import ACTION_IDS

__all__ = ["COUNTED_REACTION", "ClickKeys", "FOREIGN_MODAL_TEXT", "NOT_RECORDED_TEXT", "SeenEvents", "build_app",
           "WORKING_TEXT"]

log = logging.getLogger(__name__)

WORKING_TEXT = "Got it, working on it: the answer follows in a moment."
#: What a voter is told when their vote could not be stored; the cause is in the bot's log.
NOT_RECORDED_TEXT = "not recorded: the bot could not store your answer just now; try again in a minute"
#: The answer to a Reject / Modify submission whose details loopbot did not write.
FOREIGN_MODAL_TEXT = ("this form was not opened by loopbot (its details are missing or not loopbot's), so nothing "
                      "was recorded: use the review's buttons again, or `/loopbot approve ID`")
#: Answers that stay in a modal under its field, with what was typed, instead of closing it.
_KEEP_MODAL_OPEN = (AnswerKind.REFUSED, AnswerKind.INVALID, AnswerKind.NOT_RECORDED)
#: The reaction on an @-mention whose vote counted.
COUNTED_REACTION = "white_check_mark"
_ACTION_PATTERN = re.compile(r"\Aloopbot_(approve|reject|retry|modify|pause)\Z")
_BUTTON_VERB = {action_id: label.lower() for label, action_id in ACTION_IDS.items()}


class ClickKeys:
    """The dedupe key of a button click; repeats within ``window`` seconds get the first click's key."""

    def __init__(self, window: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._first: dict[tuple[str, ...], tuple[str, float]] = {}
        self._lock = threading.Lock()

    def key(self, channel: str, message_ts: str, user: str, action_id: str, action_ts: str) -> str:
        now = self.clock()
        where = (channel, message_ts, user, action_id)
        with self._lock:
            self._first = {k: v for k, v in self._first.items() if now - v[1] < self.window}
            first_ts, _ = self._first.setdefault(where, (action_ts, now))
        return f"slack:action:{channel}:{message_ts}:{user}:{action_id}:{first_ts}"


def _identity(user: Mapping[str, Any] | None, user_id: str = "", name: str = "") -> Identity:
    user = user or {}
    return Identity("slack", str(user.get("id") or user_id), str(user.get("username") or user.get("name") or name))


class SeenEvents:
    """Events API ``event_id``s this process took in (the newest ``size``), so a retry is not handled twice.

    The store's dedupe keys make a retry count once while its review is open;
    but a retry that arrives after the first delivery decided the review finds
    no open review in the thread any more and would be told "no review is open
    here". An id is claimed when its handling starts and released if that fails,
    so a retry after a crash of the handler is still handled.
    """

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def claim(self, event_id: str) -> bool:
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)
            return True

    def release(self, event_id: str) -> None:
        with self._lock:
            self._ids.pop(event_id, None)


class _Listeners:
    """The listeners, sharing the handler, the ack budget, the click keys and the seen event ids."""

    def __init__(self, handler: VoteStages[Any] | VotesHandler, answer_wait: float, clicks: ClickKeys) -> None:
        self.batches = VoteBatches(handler)
        self.answer_wait = answer_wait
        self.clicks = clicks
        self.events = SeenEvents()
        self._after: set[asyncio.Future[Any]] = set()  # held, so a running follow-up is not collected

    async def _vote(self, reply: Reply) -> Answer:
        """The handler's answer; a vote the handler failed on (its store could not write) was not recorded."""
        try:
            return await self.batches.vote(reply)
        except Exception as err:  # noqa: BLE001 - the voter is told; the cause goes to the log
            log.error("slack: %s's answer via %s was not recorded: %s", reply.voter.qualified, reply.via,
                      type(err).__name__, exc_info=err)
            return Answer(AnswerKind.NOT_RECORDED, NOT_RECORDED_TEXT, reply.review_id)

    async def _stored(self, reply: Reply) -> asyncio.Future[Answer]:
        """Cast ``reply`` and wait up to ``answer_wait`` for it to be stored (the caller acks after this)."""
        vote = asyncio.ensure_future(self._vote(reply))
        await asyncio.wait({vote}, timeout=self.answer_wait)
        return vote

    def _after_ack(self, work: Awaitable[Any]) -> None:
        """Run ``work`` once the listener has returned and Bolt has sent the acknowledgement.

        Not Bolt's lazy listeners: they get a deep copy of the request's context, and the vote already
        under way (a future) cannot be copied (tests/adapters/slack/test_listeners_bolt.py holds Bolt to it).
        """
        task = asyncio.ensure_future(work)
        self._after.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._after.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("slack: what follows an acknowledgement failed", exc_info=task.exception())

    @staticmethod
    async def _tell(client: AsyncWebClient, respond: Mapping[str, Any], answer: Answer) -> None:
        """Ephemeral to the sender; through the response_url when the bot cannot post in that channel."""
        text = render_answer(answer)
        try:
            await client.chat_postEphemeral(channel=respond["channel"], user=respond["user"], text=text,
                                            thread_ts=respond.get("thread_ts") or None)
            return
        except SlackApiError as exc:
            if not respond.get("response_url"):
                log.warning("cannot tell %s in %s what became of their answer: %s",
                            respond["user"], respond["channel"], exc.response.get("error"))
                return
        await AsyncWebhookClient(respond["response_url"]).send(text=text, response_type="ephemeral",
                                                               replace_original=False)

    # --- slash command --------------------------------------------------------------
    async def command(self, ack: Any, body: dict[str, Any], respond: Any) -> None:
        reply = Reply(
            voter=_identity(None, body.get("user_id", ""), body.get("user_name", "")),
            command=parse_command(body.get("text") or ""),
            dedupe_key=f"slack:command:{body['trigger_id']}" if body.get("trigger_id") else None,
            via="slash",
            respond={"channel": body.get("channel_id", ""), "user": body.get("user_id", ""),
                     "response_url": body.get("response_url", "")},
        )
        vote = await self._stored(reply)
        if vote.done():
            await ack(text=render_answer(vote.result()), response_type="ephemeral")
            return
        await ack(text=WORKING_TEXT, response_type="ephemeral")
        self._after_ack(self._respond_when_done(vote, respond))

    @staticmethod
    async def _respond_when_done(vote: asyncio.Future[Answer], respond: Any) -> None:
        answer = await vote
        await respond(text=render_answer(answer), response_type="ephemeral", replace_original=False)

    # --- buttons ------------------------------------------------------------------------
    async def button(self, ack: Any, body: dict[str, Any], action: dict[str, Any], client: AsyncWebClient) -> None:
        review_id = str(action.get("value") or "")
        container = body.get("container") or {}
        message = body.get("message") or {}
        channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
        message_ts = str(container.get("message_ts") or message.get("ts") or "")
        thread_ts = str(message.get("thread_ts") or "")
        voter = _identity(body.get("user"))
        verb = _BUTTON_VERB[action["action_id"]]
        if verb in ("reject", "modify"):
            decision = HumanDecision.REJECT if verb == "reject" else HumanDecision.MODIFY
            context = ModalContext(review_id, channel, message_ts, thread_ts, str(body.get("response_url") or ""))
            await ack()
            self._after_ack(client.views_open(trigger_id=body["trigger_id"], view=build_modal(decision, context)))
            return
        respond = {"channel": channel, "user": voter.id, "thread_ts": thread_ts,
                   "response_url": str(body.get("response_url") or "")}
        reply = Reply(
            voter=voter,
            command=parse_command(f"{verb} {review_id}"),
            review_id=review_id or None,
            dedupe_key=self.clicks.key(channel, message_ts, voter.id, action["action_id"],
                                       str(action.get("action_ts") or "")),
            via="button",
            respond=respond,
        )
        vote = await self._stored(reply)  # acked once stored: a crash after the 200 loses no vote
        await ack()
        self._after_ack(self._tell_when_done(client, respond, vote))

    # --- modals ------------------------------------------------------------------------
    async def submission(self, ack: Any, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient) -> None:
        decision = MODAL_CALLBACKS[view["callback_id"]]
        try:
            context = ModalContext.from_metadata(str(view.get("private_metadata") or ""))
        except ValueError as exc:  # not a modal loopbot opened (or one from a version that wrote other details)
            log.warning("slack: a %s submission whose details loopbot did not write: %s", view["callback_id"], exc)
            await ack(response_action="errors", errors={FIELD_BLOCK[decision]: FOREIGN_MODAL_TEXT})
            return
        command: Command | CommandError
        try:
            command = command_from_submission(decision, context.review_id, submitted_text(view, decision))
        except CommandError as exc:
            await ack(response_action="errors", errors={FIELD_BLOCK[decision]: str(exc)})
            return
        voter = _identity(body.get("user"))
        respond = {"channel": context.channel, "user": voter.id, "thread_ts": context.thread_ts,
                   "response_url": context.response_url}
        reply = Reply(voter=voter, command=command, review_id=context.review_id,
                      dedupe_key=f"slack:view:{view.get('id') or body.get('trigger_id')}", via="modal",
                      respond=respond)
        # Voted before the ack when it is quick, so a refusal (changes the run's plan cannot take, a voter
        # who may not answer) stays in the modal under the field, with what was typed, instead of closing it.
        vote = await self._stored(reply)
        if vote.done() and vote.result().kind in _KEEP_MODAL_OPEN:
            error = render_answer(vote.result())[:MAX_ERROR]
            await ack(response_action="errors", errors={FIELD_BLOCK[decision]: error})
            return
        await ack()
        self._after_ack(self._tell_when_done(client, respond, vote))

    async def _tell_when_done(self, client: AsyncWebClient, respond: Mapping[str, Any],
                              vote: asyncio.Future[Answer]) -> None:
        answer = await vote  # awaited even when nobody can be told: its failure is logged, not lost
        if respond["channel"]:
            await self._tell(client, respond, answer)

    # --- @-mentions ----------------------------------------------------------------------
    async def mention(self, body: dict[str, Any], event: dict[str, Any], client: AsyncWebClient) -> None:
        if event.get("bot_id") or event.get("subtype") == "bot_message":  # a bot's words are never a vote
            log.info("slack: ignored a mention written by bot %s", event.get("bot_id") or "(unnamed)")
            return
        event_id = str(body.get("event_id") or "")
        if event_id and not self.events.claim(event_id):
            log.info("slack event %s arrived again (a retry): already taken in", event_id)
            return
        channel, thread_ts = str(event.get("channel") or ""), str(event.get("thread_ts") or "")
        respond = {"channel": channel, "user": str(event.get("user") or ""),
                   "thread_ts": thread_ts or str(event.get("ts") or "")}
        reply = Reply(
            voter=_identity(None, str(event.get("user") or "")),
            command=parse_command(str(event.get("text") or "")),
            context={"channel": channel, "thread_ts": thread_ts} if thread_ts else None,
            dedupe_key=f"slack:event:{event_id}" if event_id else None,
            via="mention",
            respond=respond,
        )
        vote = await self._stored(reply)  # the event is acked once its vote is stored
        self._after_ack(self._answer_mention(event_id, str(event.get("ts") or ""), respond, vote, client))

    async def _answer_mention(self, event_id: str, ts: str, respond: Mapping[str, Any],
                              vote: asyncio.Future[Answer], client: AsyncWebClient) -> None:
        answer = await vote
        if answer.kind is AnswerKind.NOT_RECORDED:  # a retry of this event may be taken in again
            self.events.release(event_id)
        if answer.kind is AnswerKind.DUPLICATE:  # a retried delivery: the first one was answered
            return
        await self._tell(client, respond, answer)
        if answer.counted and ts:  # everyone in the thread sees that it counted
            try:
                await client.reactions_add(channel=respond["channel"], timestamp=ts, name=COUNTED_REACTION)
            except SlackApiError as exc:
                log.info("cannot react to %s's mention in %s: %s", respond["user"], respond["channel"],
                         exc.response.get("error"))


def build_app(
    *,
    signing_secret: str,
    handler: VoteStages[Any] | VotesHandler,
    bot_token: str = "",
    api_base_url: str = DEFAULT_API_BASE_URL,
    command: str = "/loopbot",
    client: AsyncWebClient | None = None,
    answer_wait: float = 2.0,
    clicks: ClickKeys | None = None,
    logger: logging.Logger | None = None,
) -> AsyncApp:
    """The Bolt app behind ``POST /slack/events`` and Socket Mode; it verifies Slack's signatures itself."""
    if not signing_secret:
        raise ValueError("slack.signing_secret is required to verify requests from Slack")
    if client is None:
        if not bot_token:
            raise ValueError("slack.bot_token (xoxb-...) is required")
        client = AsyncWebClient(token=bot_token, base_url=api_base_url if api_base_url.endswith("/")
                                else api_base_url + "/")
    app = AsyncApp(signing_secret=signing_secret, client=client, name="loopbot", logger=logger or log,
                   process_before_response=True)
    listeners = _Listeners(handler, answer_wait, clicks or ClickKeys())
    app.command(command)(listeners.command)
    app.action(_ACTION_PATTERN)(listeners.button)
    for callback_id in MODAL_CALLBACKS:
        app.view(callback_id)(listeners.submission)
    app.event("app_mention")(listeners.mention)
    return app
