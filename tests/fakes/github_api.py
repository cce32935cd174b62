"""A fake GitHub REST API: a real HTTP server on 127.0.0.1 (port 0) that records calls and answers them.

It serves the endpoints loopbot uses - issues (create, get, list with a
label filter), comments (create, get, edit, list per issue or per repository
with ``since`` and ``Link`` pagination, ETag / 304), labels (add, remove, with
``labeled`` issue events), reactions, collaborator permissions, team
memberships, App installation tokens and ``GET /app`` (JWT only, as GitHub:
an installation token gets 401 there, and a JWT nothing else; comments made
with an installation token carry ``performed_via_github_app``) - with rate-limit headers on every
answer and failures injected on demand (``fail(...)``: 403 secondary rate
limit, 429, 500, ... N times, then normal answers again). As strict as
GitHub where loopbot relies on it: a comment body over 65,536 characters is
refused with 422 ("body is too long (maximum is 65536 characters)"), and
removing a label the issue does not have with 404.

Every object is complete and its URLs use the server's own base URL, so
PyGithub never lazily fetches anything and its URL checks pass. With
``prefix="/api/v3"`` it serves as GitHub Enterprise Server does: under that
path only (``base_url`` includes it), 404 anywhere else.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt

__all__ = ["Call", "FakeGitHub", "Failure"]

BOT_LOGIN = "loopbot-app[bot]"
#: The REST API versions GitHub serves; any other ``X-GitHub-Api-Version`` is answered 400, as GitHub does.
API_VERSIONS = ("2022-11-28", "2026-03-10")


@dataclass
class Call:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    status: int = 0
    at: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic, comparable across threads)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"


#: GitHub's cap on a comment's body, in characters.
MAX_BODY = 65_536


def _too_long() -> tuple[int, Any, dict[str, str]]:
    """GitHub's answer to a comment body over ``MAX_BODY``, as its REST API words it."""
    return 422, {"message": "Validation Failed", "errors": [{
        "resource": "IssueComment", "code": "custom", "field": "body",
        "message": f"body is too long (maximum is {MAX_BODY} characters)"}],
        "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment"}, {}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeGitHub:
    """``with FakeGitHub() as gh: Github(base_url=gh.base_url, ...)``; inspect ``gh.calls``."""

    def __init__(self, *, bot_login: str = BOT_LOGIN, page_size_cap: int = 100, prefix: str = "") -> None:
        self.prefix = prefix.rstrip("/")
        self.bot_login = bot_login
        self.page_size_cap = page_size_cap
        self.lock = threading.RLock()
        self.calls: list[Call] = []
        self.failures: list[Failure] = []
        self.issues: dict[tuple[str, int], dict[str, Any]] = {}
        self.deleted_issues: set[tuple[str, int]] = set()
        self.comments: dict[int, dict[str, Any]] = {}
        self.stalls: list[list[Any]] = []  # [method, path pattern, release event, matching calls to let through]
        self.comment_repo: dict[int, str] = {}
        self.reactions: list[tuple[int, str, str]] = []
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.permissions: dict[tuple[str, str], str] = {}
        self.teams: dict[tuple[str, str, str], str] = {}
        self.installation_tokens: list[str] = []
        self.app_id: int | None = None  # the App whose JWT asked for a token (its bot user is ``bot_login``)
        self.rate_remaining = 5000
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._next_id = 1000
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{self.prefix}"

    def start(self) -> FakeGitHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- arranging the world ----------------------------------------------------------------------
    def new_id(self) -> int:
        with self.lock:
            self._next_id += 1
            return self._next_id

    def user(self, login: str, kind: str | None = None) -> dict[str, Any]:
        kind = kind or ("Bot" if login.endswith("[bot]") else "User")
        return {
            "login": login, "id": abs(hash(login)) % 10**8, "node_id": f"U_{login}", "type": kind,
            "url": f"{self.base_url}/users/{login}", "html_url": f"https://github.example/{login}",
            "avatar_url": "", "gravatar_id": "", "site_admin": False,
        }

    def add_issue(self, repository: str, number: int | None = None, *, title: str = "An issue", body: str = "",
                  labels: list[str] | None = None, login: str = "octocat") -> dict[str, Any]:
        with self.lock:
            if number is None:
                number = 1 + max((n for (r, n) in self.issues if r == repository), default=0)
            now = _iso(self.clock())
            api = f"{self.base_url}/repos/{repository}/issues/{number}"
            issue = {
                "id": self.new_id(), "node_id": f"I_{number}", "number": number, "title": title, "body": body,
                "url": api, "repository_url": f"{self.base_url}/repos/{repository}",
                "labels_url": api + "/labels{/name}", "comments_url": api + "/comments", "events_url": api + "/events",
                "html_url": f"https://github.example/{repository}/issues/{number}",
                "user": self.user(login), "labels": [], "state": "open", "locked": False, "assignee": None,
                "assignees": [], "milestone": None, "comments": 0, "created_at": now, "updated_at": now,
                "closed_at": None, "author_association": "OWNER", "state_reason": None,
            }
            self.issues[(repository, number)] = issue
            for name in labels or []:
                issue["labels"].append(self._label(repository, name))
            return issue

    def add_comment(self, repository: str, issue: int, body: str, login: str = "alice", *,
                    kind: str | None = None, created_at: datetime | None = None,
                    via_app: dict[str, Any] | None = None) -> dict[str, Any]:
        """A comment as if a person (or ``login``) had written it."""
        with self.lock:
            comment_id = self.new_id()
            when = _iso(created_at or self.clock())
            comment = {
                "id": comment_id, "node_id": f"IC_{comment_id}",
                "url": f"{self.base_url}/repos/{repository}/issues/comments/{comment_id}",
                "html_url": f"https://github.example/{repository}/issues/{issue}#issuecomment-{comment_id}",
                "issue_url": f"{self.base_url}/repos/{repository}/issues/{issue}",
                "user": self.user(login, kind), "created_at": when, "updated_at": when,
                "author_association": "MEMBER", "body": body, "performed_via_github_app": via_app,
                "reactions": {"url": "", "total_count": 0},
            }
            self.comments[comment_id] = comment
            self.comment_repo[comment_id] = repository
            self.issues[(repository, issue)]["comments"] += 1
            return comment

    def add_label_event(self, repository: str, issue: int, label: str, login: str = "alice") -> dict[str, Any]:
        with self.lock:
            entry = self.issues[(repository, issue)]
            if label not in [item["name"] for item in entry["labels"]]:
                entry["labels"].append(self._label(repository, label))
            event = self._event(repository, issue, "labeled", label, login)
            entry["updated_at"] = event["created_at"]  # labelling touches the issue, as on GitHub
            return event

    def delete_issue(self, repository: str, issue: int) -> None:
        with self.lock:
            self.deleted_issues.add((repository, issue))

    def fail(self, method: str, path: str, status: int, *, times: int = 1,
             headers: dict[str, str] | None = None, message: str | None = None) -> None:
        """The next ``times`` requests ``method`` whose path matches the regex ``path`` answer ``status``."""
        default = {403: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
                   429: "Too many requests", 404: "Not Found"}.get(status, "Server Error")
        with self.lock:
            self.failures.append(Failure(method, re.compile(path), status, times, headers or {}, message or default))

    def stall(self, method: str, path: str, *, skip: int = 0) -> threading.Event:
        """After ``skip`` such requests, the next ``method`` request whose path matches ``path`` takes effect, but
        its answer waits for the event.

        The bot's comment exists on GitHub while the bot has heard nothing
        back: the moment a crash is worst.
        """
        release = threading.Event()
        with self.lock:
            self.stalls.append([method, re.compile(path), release, skip])
        return release

    def _stall_for(self, call: Call) -> threading.Event | None:
        with self.lock:
            for n, (method, pattern, release, skip) in enumerate(self.stalls):
                if method == call.method and pattern.search(call.path):
                    if skip > 0:
                        self.stalls[n][3] = skip - 1
                        return None
                    del self.stalls[n]
                    return release
        return None

    # --- recorded traffic -----------------------------------------------------------------------
    def calls_to(self, method: str, pattern: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method and re.search(pattern, c.path)]

    def comments_on(self, repository: str, issue: int) -> list[dict[str, Any]]:
        suffix = f"/repos/{repository}/issues/{issue}"
        with self.lock:
            return [c for c in self.comments.values() if c["issue_url"].endswith(suffix)]

    def labels_of(self, repository: str, issue: int) -> list[str]:
        with self.lock:
            return [label["name"] for label in self.issues[(repository, issue)]["labels"]]

    # --- internals --------------------------------------------------------------------------------
    def _label(self, repository: str, name: str) -> dict[str, Any]:
        return {"id": abs(hash(name)) % 10**8, "node_id": f"L_{name}", "name": name, "color": "ededed",
                "default": False, "description": None, "url": f"{self.base_url}/repos/{repository}/labels/{name}"}

    def _event(self, repository: str, issue: int, kind: str, label: str, login: str) -> dict[str, Any]:
        event = {
            "id": self.new_id(), "node_id": "E", "url": f"{self.base_url}/repos/{repository}/issues/events/x",
            "actor": self.user(login), "event": kind, "commit_id": None, "commit_url": None,
            "created_at": _iso(self.clock()), "label": {"name": label, "color": "ededed"},
            "issue": {"number": issue, "url": f"{self.base_url}/repos/{repository}/issues/{issue}"},
        }
        self.events.setdefault(repository, []).append(event)
        return event

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = -1  # headers and body leave in one write (no delayed-ACK stall per request)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                split = urlsplit(self.path)
                query = {k: v[-1] for k, v in parse_qs(split.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = unquote(split.path)
                outside = bool(fake.prefix) and not path.startswith(fake.prefix + "/")
                call = Call(self.command, path if outside else path[len(fake.prefix):], query, body, headers)
                with fake.lock:
                    fake.calls.append(call)
                status, payload, headers = (404, {"message": "Not Found"}, {}) if outside else fake._answer(call)
                call.status = status
                release = fake._stall_for(call)
                if release is not None:
                    release.wait(30)
                self._send(status, payload, headers)

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = b"" if status in (204, 304) or payload is None else json.dumps(payload).encode()
                self.send_response(status)
                with fake.lock:
                    fake.rate_remaining = max(fake.rate_remaining - (0 if status == 304 else 1), 0)
                    remaining = fake.rate_remaining
                base = {
                    "Content-Type": "application/json; charset=utf-8",
                    "x-ratelimit-limit": "5000", "x-ratelimit-remaining": str(remaining),
                    "x-ratelimit-used": str(5000 - remaining), "x-ratelimit-resource": "core",
                    "x-ratelimit-reset": str(int(fake.clock().timestamp()) + 3600),
                }
                base.update(headers)
                for key, value in base.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if data:
                    self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _serve

        return Handler

    def _injected(self, call: Call) -> tuple[int, Any, dict[str, str]] | None:
        with self.lock:
            for failure in self.failures:
                if failure.times > 0 and failure.method == call.method and failure.pattern.search(call.path):
                    failure.times -= 1
                    return failure.status, {"message": failure.message}, dict(failure.headers)
        return None

    def _answer(self, call: Call) -> tuple[int, Any, dict[str, str]]:
        injected = self._injected(call)
        if injected is not None:
            return injected
        version = call.headers.get("x-github-api-version")
        if version is not None and version not in API_VERSIONS:
            return 400, {"message": f"The version '{version}' is not supported."}, {}
        auth = call.headers.get("authorization", "")
        if call.path == "/app" or call.path.startswith("/app/"):
            return self._as_app(call, auth)
        if auth.startswith("Bearer "):
            return 401, {"message": "A JSON web token cannot be used for this endpoint"}, {}
        if not auth.startswith("token "):
            return 401, {"message": "Requires authentication"}, {}
        for pattern, method, handler in self._routes():
            match = re.fullmatch(pattern, call.path)
            if match and method == call.method:
                with self.lock:
                    return handler(call, *match.groups())
        return 404, {"message": "Not Found"}, {}

    def _as_app(self, call: Call, auth: str) -> tuple[int, Any, dict[str, str]]:
        """``/app`` and its token exchange: only with the App's JWT (its ``iss`` is the App id)."""
        scheme, _, token = auth.partition(" ")
        if scheme != "Bearer":
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        try:
            app_id = int(jwt.decode(token, options={"verify_signature": False})["iss"])
        except (ValueError, KeyError, jwt.PyJWTError):
            return 401, {"message": "A JSON web token could not be decoded"}, {}
        with self.lock:
            self.app_id = app_id
        if call.method == "GET" and call.path == "/app":
            slug = self.bot_login.removesuffix("[bot]")
            return 200, {"id": app_id, "slug": slug, "node_id": "A_1", "name": slug, "owner": self.user("octo"),
                         "html_url": f"https://github.example/apps/{slug}", "permissions": {}, "events": []}, {}
        if call.method == "POST" and re.fullmatch(r"/app/installations/(\d+)/access_tokens", call.path):
            token = f"ghs_fake{len(self.installation_tokens) + 1}"
            self.installation_tokens.append(token)
            expires = _iso(self.clock() + timedelta(hours=1))
            return 201, {"token": token, "expires_at": expires, "permissions": {}, "repository_selection": "all"}, {}
        return 404, {"message": "Not Found"}, {}

    def _routes(self) -> list[tuple[str, str, Callable[..., tuple[int, Any, dict[str, str]]]]]:
        repo = r"/repos/([^/]+/[^/]+)"
        return [
            (repo + r"/issues", "POST", self._create_issue),
            (repo + r"/issues", "GET", self._list_issues),
            (repo + r"/issues/comments", "GET", self._list_repo_comments),
            (repo + r"/issues/events", "GET", self._list_repo_events),
            (repo + r"/issues/comments/(\d+)", "GET", self._get_comment),
            (repo + r"/issues/comments/(\d+)", "PATCH", self._edit_comment),
            (repo + r"/issues/comments/(\d+)/reactions", "POST", self._react),
            (repo + r"/issues/(\d+)", "GET", self._get_issue),
            (repo + r"/issues/(\d+)/comments", "POST", self._create_comment),
            (repo + r"/issues/(\d+)/comments", "GET", self._list_issue_comments),
            (repo + r"/issues/(\d+)/events", "GET", self._list_issue_events),
            (repo + r"/issues/(\d+)/labels", "POST", self._add_labels),
            (repo + r"/issues/(\d+)/labels/(.+)", "DELETE", self._remove_label),
            (repo + r"/collaborators/([^/]+)/permission", "GET", self._permission),
            (r"/orgs/([^/]+)/teams/([^/]+)/memberships/([^/]+)", "GET", self._membership),
            (r"/user", "GET", self._whoami),
        ]

    def _issue(self, repository: str, number: str) -> dict[str, Any] | tuple[int, Any, dict[str, str]]:
        key = (repository, int(number))
        if key in self.deleted_issues:
            return 410, {"message": "This issue was deleted"}, {}
        if key not in self.issues:
            return 404, {"message": "Not Found"}, {}
        return self.issues[key]

    def _page(self, call: Call, rows: list[dict[str, Any]]) -> tuple[int, Any, dict[str, str]]:
        """One page of ``rows`` with ``Link`` headers, or 304 when ``If-None-Match`` names this page's ETag."""
        per_page = min(int(call.query.get("per_page", "30")), self.page_size_cap)
        page = int(call.query.get("page", "1"))
        chunk = rows[(page - 1) * per_page: page * per_page]
        headers: dict[str, str] = {}
        last = max((len(rows) + per_page - 1) // per_page, 1)
        links = []

        def link(number: int, rel: str) -> str:
            params = {**call.query, "page": str(number)}
            query = "&".join(f"{k}={v}" for k, v in params.items())
            return f'<{self.base_url}{call.path}?{query}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        if links:
            headers["Link"] = ", ".join(links)
        etag = '"' + hashlib.sha256(json.dumps(chunk, sort_keys=True).encode()).hexdigest()[:20] + '"'
        headers["ETag"] = etag
        if call.headers.get("if-none-match") == etag:
            return 304, None, headers
        return 200, chunk, headers

    # --- handlers ------------------------------------------------------------------------------------
    def _create_issue(self, call: Call, repository: str) -> tuple[int, Any, dict[str, str]]:
        body = call.body or {}
        issue = self.add_issue(repository, title=body.get("title", ""), body=body.get("body") or "",
                               labels=list(body.get("labels") or []), login=self.bot_login)
        return 201, issue, {}

    def _list_issues(self, call: Call, repository: str) -> tuple[int, Any, dict[str, str]]:
        wanted = [name for name in call.query.get("labels", "").split(",") if name]
        state = call.query.get("state", "open")
        rows = [
            issue for (r, n), issue in sorted(self.issues.items(), key=lambda kv: -kv[0][1])
            if r == repository and (r, n) not in self.deleted_issues
            and (state == "all" or issue["state"] == state)
            and all(name in [label["name"] for label in issue["labels"]] for name in wanted)
        ]
        return self._page(call, rows)

    def _get_issue(self, call: Call, repository: str, number: str) -> tuple[int, Any, dict[str, str]]:
        found = self._issue(repository, number)
        return found if isinstance(found, tuple) else (200, found, {})

    def _create_comment(self, call: Call, repository: str, number: str) -> tuple[int, Any, dict[str, str]]:
        found = self._issue(repository, number)
        if isinstance(found, tuple):
            return found
        body = (call.body or {}).get("body", "")
        if len(body) > MAX_BODY:
            return _too_long()
        via_app = None
        if call.headers.get("authorization", "").startswith("token ghs_") and self.app_id is not None:
            slug = self.bot_login.removesuffix("[bot]")
            via_app = {"id": self.app_id, "slug": slug, "node_id": "A_1", "name": slug}
        return 201, self.add_comment(repository, int(number), body, self.bot_login, via_app=via_app), {}

    def _comment(self, repository: str, comment_id: str) -> dict[str, Any] | None:
        comment = self.comments.get(int(comment_id))
        return comment if comment is not None and self.comment_repo[int(comment_id)] == repository else None

    def _get_comment(self, call: Call, repository: str, comment_id: str) -> tuple[int, Any, dict[str, str]]:
        comment = self._comment(repository, comment_id)
        return (200, comment, {}) if comment else (404, {"message": "Not Found"}, {})

    def _edit_comment(self, call: Call, repository: str, comment_id: str) -> tuple[int, Any, dict[str, str]]:
        comment = self._comment(repository, comment_id)
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        body = (call.body or {}).get("body", comment["body"])
        if len(body) > MAX_BODY:
            return _too_long()
        comment["body"] = body
        comment["updated_at"] = _iso(self.clock())
        return 200, comment, {}

    def _since(self, call: Call, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        since = call.query.get("since")
        return [row for row in rows if not since or row["updated_at"] >= since]

    def _list_issue_comments(self, call: Call, repository: str, number: str) -> tuple[int, Any, dict[str, str]]:
        found = self._issue(repository, number)
        if isinstance(found, tuple):
            return found
        rows = sorted(self.comments_on(repository, int(number)), key=lambda c: c["id"])
        return self._page(call, self._since(call, rows))

    def _list_repo_comments(self, call: Call, repository: str) -> tuple[int, Any, dict[str, str]]:
        rows = [c for cid, c in self.comments.items() if self.comment_repo[cid] == repository]
        key = "updated_at" if call.query.get("sort") == "updated" else "created_at"
        rows.sort(key=lambda c: (c[key], c["id"]), reverse=call.query.get("direction") == "desc")
        return self._page(call, self._since(call, rows))

    def _react(self, call: Call, repository: str, comment_id: str) -> tuple[int, Any, dict[str, str]]:
        if self._comment(repository, comment_id) is None:
            return 404, {"message": "Not Found"}, {}
        content = (call.body or {}).get("content", "")
        if content not in ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"):
            return 422, {"message": "Validation Failed"}, {}
        entry = (int(comment_id), content, self.bot_login)
        status = 200 if entry in self.reactions else 201
        if status == 201:
            self.reactions.append(entry)
        return status, {"id": self.new_id(), "node_id": "R", "user": self.user(self.bot_login),
                        "content": content, "created_at": _iso(self.clock())}, {}

    def _add_labels(self, call: Call, repository: str, number: str) -> tuple[int, Any, dict[str, str]]:
        found = self._issue(repository, number)
        if isinstance(found, tuple):
            return found
        names = call.body if isinstance(call.body, list) else (call.body or {}).get("labels", [])
        for name in names:
            if name not in [label["name"] for label in found["labels"]]:
                found["labels"].append(self._label(repository, name))
                self._event(repository, int(number), "labeled", name, self.bot_login)
        return 200, found["labels"], {}

    def _remove_label(self, call: Call, repository: str, number: str, name: str) -> tuple[int, Any, dict[str, str]]:
        found = self._issue(repository, number)
        if isinstance(found, tuple):
            return found
        if name not in [label["name"] for label in found["labels"]]:
            return 404, {"message": "Label does not exist"}, {}
        found["labels"] = [label for label in found["labels"] if label["name"] != name]
        self._event(repository, int(number), "unlabeled", name, self.bot_login)
        return 200, found["labels"], {}

    def _list_issue_events(self, call: Call, repository: str, number: str) -> tuple[int, Any, dict[str, str]]:
        rows = [e for e in self.events.get(repository, []) if e["issue"]["number"] == int(number)]
        return self._page(call, [{k: v for k, v in e.items() if k != "issue"} for e in rows])

    def _list_repo_events(self, call: Call, repository: str) -> tuple[int, Any, dict[str, str]]:
        return self._page(call, list(reversed(self.events.get(repository, []))))  # newest first, as GitHub

    def _permission(self, call: Call, repository: str, login: str) -> tuple[int, Any, dict[str, str]]:
        role = self.permissions.get((repository, login))
        if role is None:
            return 404, {"message": "Not Found"}, {}
        permission = {"maintain": "write", "triage": "read"}.get(role, role)
        return 200, {"permission": permission, "role_name": role, "user": self.user(login)}, {}

    def _whoami(self, call: Call) -> tuple[int, Any, dict[str, str]]:
        if call.headers.get("authorization", "").startswith("token ghs_"):
            return 403, {"message": "Resource not accessible by integration"}, {}
        return 200, self.user(self.bot_login), {}

    def _membership(self, call: Call, org: str, slug: str, login: str) -> tuple[int, Any, dict[str, str]]:
        state = self.teams.get((org, slug, login))
        if state is None:
            return 404, {"message": "Not Found"}, {}
        return 200, {"state": state, "role": "member", "url": f"{self.base_url}/orgs/{org}/teams/{slug}"}, {}
