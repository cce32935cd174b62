"""The GitHub side of triage: paginated reads, paced writes, rate limits waited out.

Built on ``adapters.github.client.GitHubClient`` (PyGithub underneath), whose
every failure is a ``ChannelError``; a rate limit carries ``retry_after``.
Here a rate-limited call sleeps that long (at most ``max_wait`` seconds, at
most ``max_retries`` times) and is sent again - the same page, never the
pages already read, so nothing is lost or read twice. A longer wait raises,
and the engine's recovery retries the step later from the saved run.

Writes (labels, comments) are paced to GitHub's content-creation limits:
at most ``writes_per_minute`` in any minute and ``writes_per_hour`` in any
hour (80 and 500 by default), with a progress line every ``progress_every``
writes.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from adapters.channel import ChannelError
from adapters.github.client import GitHubClient
from adapters.github.identity import Me

__all__ = ["Pacer", "TriageGitHub"]

log = logging.getLogger("bot.patterns.triage")
T = TypeVar("T")


class Pacer:
    """Sliding windows over recent writes: ``wait()`` sleeps until one more write fits both limits."""

    def __init__(
        self,
        per_minute: int | None = 80,
        per_hour: int | None = 500,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limits = [(limit, window) for limit, window in ((per_minute, 60.0), (per_hour, 3600.0)) if limit]
        self._clock = clock
        self._sleep = sleep
        self._writes: deque[float] = deque()
        self.waited = 0.0

    def wait(self) -> None:
        while True:
            now = self._clock()
            longest = max((window for _, window in self.limits), default=0.0)
            while self._writes and now - self._writes[0] >= longest:
                self._writes.popleft()
            delay = 0.0
            for limit, window in self.limits:
                recent = [t for t in self._writes if now - t < window]
                if len(recent) >= limit:
                    delay = max(delay, recent[-limit] + window - now)
            if delay <= 0:
                self._writes.append(now)
                return
            self.waited += delay
            self._sleep(delay)


class TriageGitHub:
    """The calls triage makes, counted (``calls``), each waited out when rate limited."""

    def __init__(
        self,
        client: GitHubClient,
        repository: str,
        *,
        pacer: Pacer | None = None,
        max_wait: float = 120.0,
        max_retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.repository = repository
        self.pacer = pacer or Pacer()
        self.max_wait = max_wait
        self.max_retries = max_retries
        self._sleep = sleep
        self.calls = 0
        self.rate_limited = 0

    def _send(self, what: str, call: Callable[[], T]) -> T:
        """``call()``, again after each rate limit's ``retry_after`` (within ``max_wait`` and ``max_retries``)."""
        attempt = 0
        while True:
            self.calls += 1
            try:
                return call()
            except ChannelError as err:
                wait = err.retry_after
                attempt += 1
                if wait is None or attempt > self.max_retries or wait > self.max_wait:
                    raise
                self.rate_limited += 1
                log.warning("triage %s: %s rate limited; waiting %.1fs (try %d of %d)",
                            self.repository, what, wait, attempt, self.max_retries)
                self._sleep(wait)

    def pages(self, path: str, params: Mapping[str, str]) -> Iterator[list[dict[str, Any]]]:
        """Each page of a list endpoint (100 rows), following ``Link: rel="next"``; a rate limit repeats one page."""
        url: str | None = f"/repos/{self.repository}/{path}"
        query: dict[str, str] | None = {**params, "per_page": "100"}
        while url:
            page = self._send(f"GET {path}", partial(self.client.get_json, url, query))
            if not isinstance(page.data, list):
                raise ChannelError(f"GitHub GET {path}: expected a list, got {type(page.data).__name__}")
            yield [row for row in page.data if isinstance(row, dict)]
            url, query = page.next_url, None  # the next link carries the query

    def open_items(self) -> list[dict[str, Any]]:
        """Every open issue and pull request (the issues endpoint lists both; PRs have ``pull_request``)."""
        return [row for page in self.pages("issues", {"state": "open"}) for row in page]

    def open_pulls(self) -> list[dict[str, Any]]:
        """Every open pull request, with ``requested_reviewers`` and ``requested_teams``."""
        return [row for page in self.pages("pulls", {"state": "open"}) for row in page]

    def me(self) -> Me:
        """Who triage acts as (a token's user or the App's ``<slug>[bot]``): its own issues are not triaged."""
        return self._send("GET /user", self.client.me)

    def reviewed(self, number: int) -> bool:
        """Has anyone submitted a review of pull request ``number`` (a pending draft is no review)?"""
        page = self._send(f"GET pulls/{number}/reviews",
                          partial(self.client.get_json, f"/repos/{self.repository}/pulls/{number}/reviews",
                                  {"per_page": "100"}))
        rows = page.data if isinstance(page.data, list) else []
        return any(isinstance(row, dict) and row.get("state") != "PENDING" for row in rows)

    def changed_since(self, since: str) -> list[dict[str, Any]]:
        """Issues and PRs, open or closed, updated at or after ``since`` (ISO 8601)."""
        return [row for page in self.pages("issues", {"state": "all", "since": since}) for row in page]

    def add_labels(self, number: int, labels: list[str]) -> None:
        self.pacer.wait()
        self._send(f"label #{number}", lambda: self.client.add_labels(self.repository, number, *labels))

    def comment(self, number: int, body: str) -> None:
        self.pacer.wait()
        self._send(f"comment on #{number}", lambda: self.client.create_comment(self.repository, number, body))
