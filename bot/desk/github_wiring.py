"""The GitHub channel in this bot: from the ``github:`` block to comments, a webhook, polling and permissions.

loopbot's own identity (``BotIdentity``: the token's user or the App's
``slug[bot]``) is learned at start and, until it is known, before every post;
the channel, the webhook and the poller share it. A vote counts only on the
review's own issue, and permissions are those on the review's repository.

Answers arrive by ``POST /github/webhook`` (signed; several secrets for
rotation) and/or by polling every ``github.poll_interval``; both hand each
comment's votes to the same ``accept`` (``bot.desk.answer_queue``), which
records them durably before they are cast in batches, and voters are
answered - a reply comment and a reaction - through the outbox.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.routing import BaseRoute

from adapters.channel import ChannelError, Reply
from adapters.github import BotIdentity, Directory, GitHubChannel, Poller, Watch, make_client, webhook_route
from adapters.github.directory import permission_at_least
from adapters.github.webhook import Accept
from loop_engine.atomic import atomic_write_text

from bot.config_blocks import GitHubConfig
from bot.review_records import Reviewers
from bot.store.base import Store

__all__ = ["GitHubKit", "GitHubMembership", "FilePollState"]

log = logging.getLogger(__name__)

#: With no GitHub reviewer key at all, who may answer on GitHub (anyone can comment on a public issue).
DEFAULT_PERMISSION = "write"


class GitHubMembership:
    """``github_users`` / ``github_teams`` name people; ``github_min_permission`` admits by role, or is their floor."""

    always_checks = True

    def __init__(self, directory: Directory) -> None:
        self._directory = directory

    @staticmethod
    def _review_post(where: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The review's own post on the issue the answer was given on, if it was given on one."""
        repository, issue = str(where.get("repository") or "").casefold(), where.get("issue")
        for post in where.get("review_posts") or ():
            if str(post.get("repository") or "").casefold() == repository and post.get("issue") == issue:
                return post
        return None

    def place_refusal(self, where: Mapping[str, Any]) -> str | None:
        """On GitHub a review is answered on its own issue in its own repository, and nowhere else."""
        if self._review_post(where) is None:
            return "an answer counts only as a comment or label on the review's own GitHub issue"
        return None

    def refusal(self, reviewers: Reviewers, login: str, where: Mapping[str, Any]) -> str | None:
        users = {u.casefold() for u in reviewers.github_users or []}
        teams = reviewers.github_teams or []
        floor = reviewers.github_min_permission
        if not (users or teams or floor):
            if not reviewers.anyone and reviewers.github_users is not None:
                return "review.reviewers.github_users is empty, so nobody may answer on GitHub"
            floor = DEFAULT_PERMISSION
        if users or teams:
            named = login.casefold() in users or any(self._directory.in_team(team, login) for team in teams)
            if not named:
                listed = ", ".join([*(reviewers.github_users or []), *teams]) or "nobody"
                return f"@{login} is not one of this loop's GitHub reviewers ({listed})"
        if floor is None:
            return None
        post = self._review_post(where)  # the review's repository, never the one the answer came from
        if post is None:
            return f"cannot check @{login}'s permission: the answer was not given on the review's issue"
        repository = str(post["repository"])
        permission = self._directory.permission(repository, login)
        if permission_at_least(permission, floor):
            return None
        return f"@{login} has {permission} permission on {repository}; answering needs at least {floor}"


class FilePollState:
    """The poller's cursor as one JSON file in ``state_dir`` (written atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> dict[str, Any]:
        import json

        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except ValueError:
            log.error("%s is not valid JSON; polling starts over from now", self.path)
            return {}
        return data if isinstance(data, dict) else {}

    def save(self, state: dict[str, Any]) -> None:
        import json

        atomic_write_text(self.path, json.dumps(state, sort_keys=True))


class GitHubKit:
    """Everything the bot needs of GitHub, built from its config block."""

    name = "github"

    def __init__(self, config: GitHubConfig, state_dir: Path) -> None:
        self._config = config
        secret = config.private_key.get_secret_value() if config.private_key is not None else None
        token = config.token.get_secret_value() if config.token is not None else None
        self.client = make_client(config.base_url, token=token, app_id=config.app_id, private_key=secret,
                                  installation_id=config.installation_id)
        self.identity = BotIdentity(self.client.me)
        self.channel = GitHubChannel(self.client, bot_login=self.identity)
        self.directory = Directory(self.client)
        self.membership = GitHubMembership(self.directory)
        self._poll_state = FilePollState(state_dir / "github-poll.json")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def learn_identity(self) -> None:
        """Who loopbot is on GitHub, asked at start; on failure every post asks again (and waits until known)."""
        if self.identity.me is None:
            try:
                self.identity.require()
            except ChannelError as err:
                log.warning("github: cannot tell which login the bot comments as yet (%s); "
                            "nothing is posted on GitHub until it can", err)

    def routes(self, accept: Accept) -> Sequence[BaseRoute]:
        secret = self._config.webhook_secret
        if secret is None:
            return []
        self.learn_identity()
        secrets = [s for s in secret.get_secret_value().split(",") if s.strip()]  # "new,old" while rotating
        return [webhook_route([s.strip() for s in secrets], accept, bot_login=self.identity)]

    def start(self, accept: Callable[[str, list[Reply]], bool], watches: Callable[[], list[Watch]]) -> None:
        """Poll every ``poll_interval`` (once at once, to catch answers given while the bot was down).

        ``accept(key, replies)``: records a polled comment as the webhook route records a delivery.
        """
        interval = self._config.poll_interval
        if interval is None:
            return
        self.learn_identity()
        poller = Poller(self.client, self._poll_state, accept, bot_login=self.identity,
                        clock=lambda: datetime.now(UTC))

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    poller.poll_once(watches())
                except Exception:  # the poller's thread boundary: log, wait, poll again
                    log.exception("github: polling failed; trying again in %s", interval)
                self._stop.wait(interval.total_seconds())

        self._thread = threading.Thread(target=loop, name="github-poll", daemon=True)
        self._thread.start()

    def check(self, repositories: Sequence[str]) -> str:
        """Who the token or App acts as, and that each repository can be read; ChannelError says what is wrong."""
        me = self.client.me()
        for repository in repositories:
            try:
                self.client.get_json(f"/repos/{repository}/issues", {"per_page": "1"})
            except ChannelError as err:
                raise ChannelError(f"cannot read {repository} ({err}); give the token or App access to it",
                                   permanent=True) from err
        as_who = f"token of @{me.login}" if me.app_id is None else f"GitHub App installation, as @{me.login}"
        where = f"; can read {', '.join(repositories)}" if repositories else ""
        return f"{as_who} at {self._config.base_url}{where}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)


def open_review_watches(store: Store) -> list[Watch]:
    """The GitHub issues of the open reviews: where the poller looks for answers."""
    watches: dict[tuple[str, int], Watch] = {}
    for review in store.open_reviews():
        for raw in review.posts:
            data = raw.get("data") or {}
            if raw.get("channel") == "github" and data.get("repository") and data.get("issue"):
                key = (str(data["repository"]), int(data["issue"]))
                watches.setdefault(key, Watch(key[0], key[1], since=review.created_at))
    return list(watches.values())
