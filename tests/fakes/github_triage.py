"""FakeGitHub with what triage needs: thousands of issues and PRs over many pages, ``since``, pulls, people.

``TriageGitHub`` extends ``tests.fakes.github_api.FakeGitHub`` (unchanged)
with:

- ``bulk(repository, specs)``: many issues / PRs at once (title, body,
  labels, ``updated_at``, assignees, requested reviewers, ``pr=True``);
- ``GET /repos/{o}/{r}/issues`` with ``state`` (open, closed, all) and
  ``since`` (updated at or after), PRs included with a ``pull_request`` key,
  newest first as GitHub lists them;
- ``GET /repos/{o}/{r}/pulls`` (open PRs with ``requested_reviewers``,
  ``requested_teams`` and ``assignees``) and ``GET .../pulls/{n}/reviews``
  (``review(repository, number, login)``: a submitted review, after which -
  as on GitHub - the reviewer is no longer among the requested ones);
- labels added through the API bump ``updated_at`` as GitHub does;
- what people do meanwhile: ``close``, ``person_labels``;
- rate limits: ``rate_limit(method, path, retry_after=0.05, times=1)`` injects
  a 403 secondary rate limit with ``Retry-After`` (the base ``fail``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.fakes.github_api import Call, FakeGitHub, _iso

__all__ = ["TriageGitHub", "Answer"]

Answer = tuple[int, Any, dict[str, str]]


class TriageGitHub(FakeGitHub):
    """``with TriageGitHub() as gh: gh.bulk("octo/ops", [...])``; count calls with ``gh.calls_to``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.ticks = 0

    # --- arranging ------------------------------------------------------------------------------
    def _tick(self) -> str:
        """A strictly later timestamp each time (GitHub's are per second; tests need an order)."""
        with self.lock:
            self.ticks += 1
            return _iso(self.clock() + timedelta(seconds=self.ticks))

    def bulk(self, repository: str, specs: Iterable[Mapping[str, Any]]) -> None:
        """Issues (and PRs with ``pr=True``) numbered on from the highest; each spec's keys are optional."""
        with self.lock:
            following = 1 + max((n for (r, n) in self.issues if r == repository), default=0)
            for spec in specs:
                number = spec.get("number") or following
                following = max(following, number + 1)
                issue = self.add_issue(repository, number, title=spec.get("title", "An issue"),
                                       body=spec.get("body", ""), labels=list(spec.get("labels", [])))
                if "updated_at" in spec:
                    issue["updated_at"] = issue["created_at"] = spec["updated_at"]
                issue["assignees"] = [self.user(login) for login in spec.get("assignees", [])]
                issue["assignee"] = issue["assignees"][0] if issue["assignees"] else None
                if spec.get("pr"):
                    number = issue["number"]
                    issue["pull_request"] = {
                        "url": f"{self.base_url}/repos/{repository}/pulls/{number}",
                        "html_url": f"https://github.example/{repository}/pull/{number}",
                        "diff_url": "", "patch_url": "", "merged_at": None,
                    }
                    issue["_reviewers"] = list(spec.get("reviewers", []))
                    issue["_reviews"] = []

    def review(self, repository: str, number: int, login: str = "bob", state: str = "APPROVED") -> None:
        """``login`` submits a review of PR ``number``: it leaves the requested reviewers, ``updated_at`` moves."""
        with self.lock:
            issue = self.issues[(repository, number)]
            issue["_reviewers"] = [who for who in issue["_reviewers"] if who != login]
            issue["_reviews"].append({"id": self.new_id(), "user": self.user(login), "state": state,
                                      "body": "", "submitted_at": self._tick()})
            issue["updated_at"] = self._tick()

    def close(self, repository: str, number: int) -> None:
        with self.lock:
            issue = self.issues[(repository, number)]
            issue["state"], issue["closed_at"] = "closed", self._tick()
            issue["updated_at"] = issue["closed_at"]

    def person_labels(self, repository: str, number: int, label: str, login: str = "alice") -> None:
        with self.lock:
            self.add_label_event(repository, number, label, login)
            self.issues[(repository, number)]["updated_at"] = self._tick()

    def rate_limit(self, method: str, path: str, *, retry_after: float = 0.05, times: int = 1) -> None:
        self.fail(method, path, 403, times=times, headers={"Retry-After": str(retry_after)})

    # --- routes -----------------------------------------------------------------------------------
    def _routes(self) -> list[tuple[str, str, Any]]:
        repo = r"/repos/([^/]+/[^/]+)"
        ours = [(repo + r"/issues", "GET", self._list_all), (repo + r"/pulls", "GET", self._list_pulls),
                (repo + r"/pulls/(\d+)/reviews", "GET", self._list_reviews)]
        return ours + super()._routes()

    @staticmethod
    def _public(issue: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in issue.items() if not k.startswith("_")}

    def _list_all(self, call: Call, repository: str) -> Answer:
        state = call.query.get("state", "open")
        since = call.query.get("since")
        rows = [
            self._public(issue) for (r, n), issue in sorted(self.issues.items(), key=lambda kv: -kv[0][1])
            if r == repository and (r, n) not in self.deleted_issues
            and (state == "all" or issue["state"] == state)
            and (not since or issue["updated_at"] >= since)
        ]
        return self._page(call, rows)

    def _list_pulls(self, call: Call, repository: str) -> Answer:
        state = call.query.get("state", "open")
        rows = []
        for (r, n), issue in sorted(self.issues.items(), key=lambda kv: -kv[0][1]):
            if r != repository or "pull_request" not in issue or (state != "all" and issue["state"] != state):
                continue
            rows.append({
                "number": n, "title": issue["title"], "body": issue["body"], "state": issue["state"],
                "url": issue["pull_request"]["url"], "html_url": issue["pull_request"]["html_url"],
                "labels": issue["labels"], "assignees": issue["assignees"], "updated_at": issue["updated_at"],
                "requested_reviewers": [self.user(login) for login in issue.get("_reviewers", [])],
                "requested_teams": [],
            })
        return self._page(call, rows)

    def _list_reviews(self, call: Call, repository: str, number: str) -> Answer:
        issue = self.issues.get((repository, int(number)))
        if issue is None or "pull_request" not in issue:
            return 404, {"message": "Not Found"}, {}
        return self._page(call, list(issue["_reviews"]))

    def _add_labels(self, call: Call, repository: str, number: str) -> Answer:
        answer = super()._add_labels(call, repository, number)
        if answer[0] == 200:
            self.issues[(repository, int(number))]["updated_at"] = self._tick()
        return answer


def days_ago(days: float, now: datetime | None = None) -> str:
    return _iso((now or datetime.now(UTC)) - timedelta(days=days))
