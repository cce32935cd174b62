"""How does loopbot talk to GitHub's REST API? A thin PyGithub wrapper with only the calls the channel needs.

Every call maps PyGithub's and requests' errors to ``ChannelError``
(``errors``: rate limits with their wait, retryable, permanent) so that the
bot's outbox, not this client, decides when to try again; timeouts and
connection errors are retryable.

The client never sleeps: PyGithub's own retry is replaced by one immediate
retry of a failed connection (nothing was sent, so even a POST is safe), and
its pauses between requests and writes are off.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import requests
from github import Auth, Consts, Github, GithubException
from urllib3.util.retry import Retry

from ..channel import ChannelError
from .errors import channel_error, header
from .identity import Me

__all__ = [
    "DEFAULT_BASE_URL",
    "Comment",
    "GitHubClient",
    "IssueInfo",
    "JsonPage",
    "comment_from_json",
    "issue_from_json",
    "make_client",
    "make_github",
]

DEFAULT_BASE_URL = Consts.DEFAULT_BASE_URL
#: The REST API version every request names (``X-GitHub-Api-Version``), so GitHub never changes answers under us.
API_VERSION = "2022-11-28"
#: GitHub's current media type; PyGithub still asks for the retired machine-man preview when it fetches an
#: App installation token.
MEDIA_TYPE = "application/vnd.github+json"


@dataclass(frozen=True)
class Comment:
    """An issue comment, as much of it as loopbot reads."""

    id: int
    body: str
    login: str
    user_type: str = "User"
    created_at: datetime | None = None
    html_url: str = ""


@dataclass(frozen=True)
class IssueInfo:
    number: int
    title: str
    body: str
    labels: tuple[str, ...] = ()
    state: str = "open"
    html_url: str = ""
    login: str = ""  # who opened it


@dataclass(frozen=True)
class JsonPage:
    """One raw GET: ``status`` 304 means unchanged since ``etag`` (and cost no rate limit)."""

    status: int
    data: Any
    etag: str | None = None
    next_url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class _AppAuth(Auth.AppAuth):
    """The App's JWT auth, which also asks for ``MEDIA_TYPE``.

    PyGithub signs the App's own requests (the installation token's ``POST
    /app/installations/{id}/access_tokens``) through this auth's public
    ``authentication`` hook after setting its preview ``Accept``; setting it
    here is the one place that request can be given the current media type.
    """

    def authentication(self, headers: dict[str, str]) -> None:
        super().authentication(headers)
        headers["Accept"] = MEDIA_TYPE


def make_github(
    base_url: str = DEFAULT_BASE_URL,
    *,
    token: str | None = None,
    app_id: int | str | None = None,
    private_key: str | None = None,
    installation_id: int | None = None,
    timeout: int = 10,
) -> Github:
    """A ``Github`` for a token or a GitHub App installation, with no sleeping and one connection retry.

    Every request names ``X-GitHub-Api-Version: 2022-11-28``.

    App auth: PyGithub's ``AppInstallationAuth`` fetches an installation token
    from ``POST {base_url}/app/installations/{id}/access_tokens`` on first use
    and again shortly before it expires.
    """
    auth: Auth.Auth
    if token:
        auth = Auth.Token(token)
    elif app_id is not None and private_key and installation_id is not None:
        auth = _AppAuth(app_id, private_key).get_installation_auth(int(installation_id))
    else:
        raise ValueError("GitHub needs github.token, or github.app_id + github.private_key + github.installation_id")
    once = Retry(total=1, connect=1, read=0, status=0, other=0, redirect=0, backoff_factor=0, raise_on_status=False)
    return Github(
        base_url=base_url.rstrip("/"),
        auth=auth,
        per_page=100,
        timeout=timeout,
        retry=once,
        seconds_between_requests=None,
        seconds_between_writes=None,
        lazy=True,
        api_version=API_VERSION,
    )


def make_client(
    base_url: str = DEFAULT_BASE_URL,
    *,
    token: str | None = None,
    app_id: int | str | None = None,
    private_key: str | None = None,
    installation_id: int | None = None,
) -> GitHubClient:
    """A ``GitHubClient`` for a token or a GitHub App installation; an App's client can also ask ``GET /app``."""
    github = make_github(base_url, token=token, app_id=app_id, private_key=private_key,
                         installation_id=installation_id)
    app_auth = Auth.AppAuth(app_id, private_key) if not token and app_id is not None and private_key else None
    return GitHubClient(github, app_auth=app_auth)


def _comment(raw: Any) -> Comment:
    """A comment PyGithub made from a complete response (so no attribute triggers a lazy GET)."""
    return comment_from_json(raw.raw_data)


def comment_from_json(data: Mapping[str, Any]) -> Comment:
    user = data.get("user") or {}
    created = data.get("created_at")
    return Comment(
        id=int(data["id"]),
        body=data.get("body") or "",
        login=str(user.get("login") or ""),
        user_type=str(user.get("type") or "User"),
        created_at=datetime.fromisoformat(created.replace("Z", "+00:00")) if isinstance(created, str) else None,
        html_url=str(data.get("html_url") or ""),
    )


def issue_from_json(data: Mapping[str, Any]) -> IssueInfo:
    return IssueInfo(
        number=int(data["number"]),
        title=str(data.get("title") or ""),
        body=str(data.get("body") or ""),
        labels=tuple(str(label.get("name")) for label in data.get("labels") or () if isinstance(label, dict)),
        state=str(data.get("state") or "open"),
        html_url=str(data.get("html_url") or ""),
        login=str((data.get("user") or {}).get("login") or ""),
    )


def _issue(raw: Any) -> IssueInfo:
    return issue_from_json(raw.raw_data)


class GitHubClient:
    """The GitHub calls of loopbot, each one request (plus pages), each failure a ``ChannelError``."""

    def __init__(self, github: Github, *, clock: Callable[[], float] = time.time,
                 app_auth: Auth.AppAuth | None = None) -> None:
        self.github = github
        self._clock = clock
        self._app_auth = app_auth  # a GitHub App's own JWT auth: ``GET /app`` takes no installation token

    @contextmanager
    def _call(self, what: str) -> Iterator[None]:
        try:
            yield
        except GithubException as exc:
            raise channel_error(exc, what, self._clock()) from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise ChannelError(f"GitHub {what}: {type(exc).__name__}: {exc}") from exc
        except (OverflowError, ValueError) as exc:  # PyGithub reads x-ratelimit-reset with int(float(...)): "inf"
            raise ChannelError(f"GitHub {what}: unreadable answer ({type(exc).__name__}: {exc})") from exc

    def _issue(self, repository: str, issue: int) -> Any:
        return self.github.get_repo(repository).get_issue(issue)  # lazy: no request

    # --- comments -----------------------------------------------------------------
    def create_comment(self, repository: str, issue: int, body: str) -> Comment:
        with self._call(f"comment on {repository}#{issue}"):
            return _comment(self._issue(repository, issue).create_comment(body))

    def get_comment(self, repository: str, comment_id: int) -> Comment:
        with self._call(f"read comment {comment_id} in {repository}"):
            path = f"/repos/{repository}/issues/comments/{comment_id}"
            _, data = self.github.requester.requestJsonAndCheck("GET", path)
        return comment_from_json(data)

    def edit_comment(self, repository: str, comment_id: int, body: str) -> None:
        with self._call(f"edit comment {comment_id} in {repository}"):
            path = f"/repos/{repository}/issues/comments/{comment_id}"
            self.github.requester.requestJsonAndCheck("PATCH", path, input={"body": body})

    def list_comments(self, repository: str, issue: int, since: datetime | None = None) -> list[Comment]:
        """Every comment of the issue (all pages), oldest first."""
        params = {"since": since.strftime("%Y-%m-%dT%H:%M:%SZ")} if since else {}
        rows = self.get_all(f"/repos/{repository}/issues/{issue}/comments", params)
        return [comment_from_json(row) for row in rows]

    def add_reaction(self, repository: str, comment_id: int, content: str) -> None:
        with self._call(f"react {content} to comment {comment_id} in {repository}"):
            path = f"/repos/{repository}/issues/comments/{comment_id}/reactions"
            self.github.requester.requestJsonAndCheck(
                "POST", path, input={"content": content}, headers={"Accept": "application/vnd.github+json"}
            )

    # --- issues and labels --------------------------------------------------------
    def create_issue(self, repository: str, title: str, body: str, labels: Sequence[str] = ()) -> IssueInfo:
        with self._call(f"open an issue in {repository}"):
            return _issue(self.github.get_repo(repository).create_issue(title=title, body=body, labels=list(labels)))

    def get_issue(self, repository: str, issue: int) -> IssueInfo:
        """One issue as it is now (its labels: loopbot removes only a label the issue has)."""
        with self._call(f"read {repository}#{issue}"):
            _, data = self.github.requester.requestJsonAndCheck("GET", f"/repos/{repository}/issues/{issue}")
        return issue_from_json(data)

    def list_issues(self, repository: str, label: str) -> list[IssueInfo]:
        """Open and closed issues with ``label`` (pull requests left out), all pages."""
        rows = self.get_all(f"/repos/{repository}/issues", {"state": "all", "labels": label})
        return [issue_from_json(row) for row in rows if "pull_request" not in row]

    def add_labels(self, repository: str, issue: int, *labels: str) -> None:
        """``POST .../labels`` with ``{"labels": [...]}``, the body GitHub documents (PyGithub sends a bare list)."""
        with self._call(f"label {repository}#{issue} {', '.join(labels)}"):
            path = f"/repos/{repository}/issues/{issue}/labels"
            self.github.requester.requestJsonAndCheck("POST", path, input={"labels": list(labels)})

    def remove_label(self, repository: str, issue: int, label: str) -> None:
        """Remove ``label``; one that is not there (already removed by a retry, or by a person) is fine."""
        try:
            with self._call(f"unlabel {repository}#{issue} {label}"):
                self._issue(repository, issue).remove_from_labels(label)
        except ChannelError as exc:
            cause = exc.__cause__
            if isinstance(cause, GithubException) and cause.status == 404 and "label" in str(cause.data).lower():
                return
            raise

    # --- who is who ------------------------------------------------------------------
    def _get_unless(self, what: str, path: str, missing: tuple[int, ...]) -> Any:
        """``GET path``'s JSON, or None when GitHub answers one of the ``missing`` statuses (a 404 that means "no")."""
        try:
            with self._call(what):
                _, data = self.github.requester.requestJsonAndCheck("GET", path)
        except ChannelError as exc:
            if isinstance(exc.__cause__, GithubException) and exc.__cause__.status in missing:
                return None
            raise
        return data

    def me(self) -> Me:
        """Who loopbot comments as: the token's user, or the App's bot user ``<slug>[bot]`` and the App's id.

        A token's user comes from ``GET /user``; an App's installation token
        cannot read that, so the App is asked with its JWT (``GET /app``).
        A ChannelError when GitHub does not say (down, refused, no login).
        """
        if self._app_auth is None:
            with self._call("read the authenticated user"):
                _, data = self.github.requester.requestJsonAndCheck("GET", "/user")
            login = data.get("login") if isinstance(data, dict) else None
            if not isinstance(login, str) or not login:
                raise ChannelError("GitHub GET /user named no login")
            return Me(login)
        with self._call("read the authenticated App"):
            _, data = self.github.requester.withAuth(self._app_auth).requestJsonAndCheck("GET", "/app")
        slug = data.get("slug") if isinstance(data, dict) else None
        app_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(slug, str) or not slug or not isinstance(app_id, int):
            raise ChannelError("GitHub GET /app named no slug and id")
        return Me(f"{slug}[bot]", app_id)

    def collaborator_permission(self, repository: str, login: str) -> str:
        """admin / maintain / write / triage / read / none (the role name, finer than ``permission``)."""
        user = urllib.parse.quote(login, safe="")
        path = f"/repos/{repository}/collaborators/{user}/permission"
        data = self._get_unless(f"permission of {login} in {repository}", path, (404,))
        if data is None:
            return "none"  # no such user, or not a collaborator
        role = str(data.get("role_name") or "").lower()
        if role in ("admin", "maintain", "write", "triage", "read"):
            return role
        return str(data.get("permission") or "none")

    def team_member(self, org: str, team_slug: str, login: str) -> bool:
        """An active member of ``org/team_slug`` (a pending invitation is not)."""
        user = urllib.parse.quote(login, safe="")
        path = f"/orgs/{org}/teams/{team_slug}/memberships/{user}"
        data = self._get_unless(f"membership of {login} in {org}/{team_slug}", path, (404,))
        return bool(data) and data.get("state") == "active"

    # --- raw conditional GETs (polling) --------------------------------------------------
    def get_json(self, url: str, params: Mapping[str, str] | None = None, etag: str | None = None) -> JsonPage:
        """One GET through PyGithub's requester (same auth, App token refresh, base URL) with If-None-Match.

        PyGithub's ``PaginatedList`` cannot send ``If-None-Match``; its
        requester can, and a 304 answer costs no rate limit.
        """
        headers = {"If-None-Match": etag} if etag else None
        with self._call(f"GET {url}"):
            status, response_headers, output = self.github.requester.requestJson(
                "GET", url, dict(params) if params else None, headers
            )
            if status >= 400:
                try:
                    data = json.loads(output) if output else {}
                except ValueError:
                    data = {"message": output[:200]}
                raise self.github.requester.createException(status, response_headers, data)
        data = json.loads(output) if status == 200 and output else None
        return JsonPage(status, data, header(response_headers, "etag"),
                        _next_link(header(response_headers, "link")), dict(response_headers))

    def get_all(self, path: str, params: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Every item of a list endpoint, following ``Link: rel="next"`` (per_page=100)."""
        rows: list[dict[str, Any]] = []
        url: str | None = path
        query: dict[str, str] | None = {**(params or {}), "per_page": "100"}
        while url:
            page = self.get_json(url, query)
            if not isinstance(page.data, list):
                raise ChannelError(f"GitHub GET {path}: expected a list, got {type(page.data).__name__}")
            rows += [row for row in page.data if isinstance(row, dict)]
            url, query = page.next_url, None  # the next link carries the query
        return rows


def _next_link(link: str | None) -> str | None:
    """The ``rel="next"`` URL of a ``Link`` header."""
    for part in (link or "").split(","):
        url, _, rel = part.partition(";")
        if 'rel="next"' in rel.replace(" ", ""):
            return url.strip().strip("<>")
    return None
