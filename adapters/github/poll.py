"""What was said on GitHub since we last looked? Polling for installs without a public webhook URL.

For each watched issue (or whole repository) the poller reads new comments
(``GET .../issues/{n}/comments?since=`` or ``GET .../issues/comments?since=
&sort=created&direction=asc``) and label events (``.../events``), follows
``Link`` pages, and turns them into the same ``Reply``s as the webhook (the
same ``dedupe_key`` per comment and per label, so one seen both ways counts
once).

Edits are not votes, for the poller as for the webhook: the webhook counts a
comment as it was created, and a comment edited before the poller read it
(``updated_at`` later than ``created_at``) no longer shows the text it was
created with, so the poller skips it.

Each first page is a conditional request (``If-None-Match`` with the ETag of
the last answer to the same URL): an idle poll gets 304, which costs no rate
limit. The requests go through PyGithub's requester (``GitHubClient.get_json``)
rather than a second HTTP client, so they share its auth - including the
refresh of a GitHub App installation token - its base URL and its retry.

The cursor (per watch: the ``since`` time, the newest comment and event ids,
and the ETags) is a JSON document the bot persists through ``PollState``.
Each comment's (or label's) replies are handed to ``accept(key, replies)``
under the key the webhook gives the same comment (``events.delivery_key``),
which records them durably, as the webhook route does, before the cursor is
saved: after a crash some are accepted again, and their key makes that
harmless - as it does for a comment both polled and delivered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ..channel import ChannelError, Reply
from .client import JsonPage
from .identity import BotIdentity
from .events import delivery_key, replies_from_comment, reply_from_label

__all__ = ["MemoryPollState", "PollAPI", "PollReport", "PollState", "Poller", "Watch"]

log = logging.getLogger(__name__)

STATE_VERSION = 1


class PollAPI(Protocol):
    def get_json(self, url: str, params: dict[str, str] | None = None, etag: str | None = None) -> JsonPage: ...


class PollState(Protocol):
    """Where the bot keeps the poller's cursor (a JSON document)."""

    def load(self) -> dict[str, Any]: ...
    def save(self, state: dict[str, Any]) -> None: ...


class MemoryPollState:
    """A ``PollState`` in memory (tests, and a bot that accepts re-reading after a restart)."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    def load(self) -> dict[str, Any]:
        return dict(self.state)

    def save(self, state: dict[str, Any]) -> None:
        self.state = dict(state)


@dataclass(frozen=True)
class Watch:
    """One issue (or, without ``issue``, every issue of a repository) to read.

    ``since`` is where a watch with no cursor yet starts (e.g. when its
    review was posted); without it, the first poll starts from now.
    """

    repository: str
    issue: int | None = None
    since: datetime | None = None

    @property
    def key(self) -> str:
        return self.repository + (f"#{self.issue}" if self.issue is not None else "")


@dataclass
class PollReport:
    replies: int = 0
    errors: list[ChannelError] = field(default_factory=list)

    @property
    def retry_after(self) -> float | None:
        waits = [e.retry_after for e in self.errors if e.retry_after is not None]
        return max(waits) if waits else None


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(value: Any) -> str:
    """GitHub's timestamps ("2026-01-02T09:00:00Z") compare correctly as strings; anything else sorts first."""
    return value if isinstance(value, str) else ""


def _issue_number(row: dict[str, Any], fallback: int | None) -> int | None:
    if fallback is not None:
        return fallback
    issue = row.get("issue")
    if isinstance(issue, dict) and isinstance(issue.get("number"), int):
        return int(issue["number"])
    url = row.get("issue_url")
    if isinstance(url, str) and url.rstrip("/").rsplit("/", 1)[-1].isdigit():
        return int(url.rstrip("/").rsplit("/", 1)[-1])
    return None


class Poller:
    """Reads the watched issues once per ``poll_once`` call; the bot calls it every ``github.poll_interval``."""

    def __init__(
        self,
        api: PollAPI,
        state: PollState,
        accept: Callable[[str, list[Reply]], bool],
        *,
        bot_login: BotIdentity | str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.state = state
        self.accept = accept
        self.bot_login = BotIdentity.of(bot_login)
        self._clock = clock

    def poll_once(self, watches: Iterable[Watch]) -> PollReport:
        """Read every watch; a failing one is reported and the rest still read, unless rate limited."""
        watches = list(watches)
        document = self.state.load()
        if document.get("version", STATE_VERSION) > STATE_VERSION:
            raise ValueError(f"poll state version {document.get('version')} is newer than this loopbot reads")
        cursors: dict[str, Any] = dict(document.get("watches") or {})
        cursors = {key: value for key, value in cursors.items() if key in {w.key for w in watches}}
        report = PollReport()
        for watch in watches:
            cursor = dict(cursors.get(watch.key) or {})
            try:
                replies = self._comments(watch, cursor) + self._labels(watch, cursor)
            except ChannelError as exc:
                log.warning("polling github %s failed: %s", watch.key, exc)
                report.errors.append(exc)
                if exc.retry_after is not None:
                    break
                continue
            by_delivery: dict[str, list[Reply]] = {}
            for reply in replies:
                by_delivery.setdefault(delivery_key([reply]), []).append(reply)
            for key, given in by_delivery.items():
                self.accept(key, given)
            report.replies += len(replies)
            cursors[watch.key] = cursor
            self.state.save({"version": STATE_VERSION, "watches": cursors})
        return report

    def _pages(self, url: str, params: dict[str, str], etag: str | None,
               stop: Callable[[list[dict[str, Any]]], bool] | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """All rows ([] when the first page is unchanged: 304) and the first page's ETag."""
        page = self.api.get_json(url, params, etag)
        if page.status == 304:
            return [], etag
        rows = [row for row in page.data or [] if isinstance(row, dict)]
        first_etag, next_url = page.etag, page.next_url
        while next_url and not (stop and stop(rows)):
            page = self.api.get_json(next_url)
            rows += [row for row in page.data or [] if isinstance(row, dict)]
            next_url = page.next_url
        return rows, first_etag

    def _comments(self, watch: Watch, cursor: dict[str, Any]) -> list[Reply]:
        state = dict(cursor.get("comments") or {})
        since = state.get("since") or _iso(watch.since or self._clock())
        last_id = int(state.get("last_id") or 0)
        if watch.issue is not None:
            url = f"/repos/{watch.repository}/issues/{watch.issue}/comments"
            params = {"since": since, "per_page": "100"}
        else:
            url = f"/repos/{watch.repository}/issues/comments"
            params = {"since": since, "sort": "created", "direction": "asc", "per_page": "100"}
        etag = state.get("etag") if state.get("etag_since") == since else None
        rows, etag = self._pages(url, params, etag)
        replies: list[Reply] = []
        newest = since
        for row in sorted(rows, key=lambda r: int(r.get("id") or 0)):
            comment_id = int(row.get("id") or 0)
            created = _time(row.get("created_at"))
            if comment_id <= last_id or created < since:
                continue  # seen already, or an older comment edited since (edits are not votes)
            last_id, newest = max(last_id, comment_id), max(newest, created)
            number = _issue_number(row, watch.issue)
            if number is None:
                continue
            if _time(row.get("updated_at")) > created:
                log.info("github %s#%s: comment %s was edited before it was read; edits are not votes",
                         watch.repository, number, comment_id)
                continue
            replies += replies_from_comment(watch.repository, number, row, bot_login=self.bot_login, via="poll")
        cursor["comments"] = {"since": newest, "last_id": last_id, "etag": etag, "etag_since": since}
        return replies

    def _labels(self, watch: Watch, cursor: dict[str, Any]) -> list[Reply]:
        state = dict(cursor.get("events") or {})
        baseline = state.get("baseline") or _iso(watch.since or self._clock())
        last_id = int(state.get("last_id") or 0)
        if watch.issue is not None:
            url = f"/repos/{watch.repository}/issues/{watch.issue}/events"
            stop = None  # one issue's events come oldest first: read them all
        else:
            url = f"/repos/{watch.repository}/issues/events"

            def stop(rows: list[dict[str, Any]]) -> bool:  # newest first: stop at what was seen or is too old
                return any(int(row.get("id") or 0) <= last_id or _time(row.get("created_at")) < baseline
                           for row in rows)
        rows, etag = self._pages(url, {"per_page": "100"}, state.get("etag"), stop)
        replies: list[Reply] = []
        newest_id = last_id
        for row in sorted(rows, key=lambda r: int(r.get("id") or 0)):
            event_id = int(row.get("id") or 0)
            if event_id <= last_id or _time(row.get("created_at")) < baseline:
                continue
            newest_id = max(newest_id, event_id)
            label = row.get("label")
            number = _issue_number(row, watch.issue)
            if row.get("event") != "labeled" or not isinstance(label, dict) or number is None:
                continue
            reply = reply_from_label(watch.repository, number, str(label.get("name") or ""), row.get("actor"),
                                     row.get("created_at"), bot_login=self.bot_login, via="poll")
            if reply is not None:
                replies.append(reply)
        cursor["events"] = {"baseline": baseline, "last_id": newest_id, "etag": etag}
        return replies
