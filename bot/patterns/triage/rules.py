"""Which labels does an issue or pull request deserve? Keyword rules on whole words, and the other judgements.

Pure functions over the item as discovered: no network, no clock (``now``
is passed in), so the planner proposes and the evaluator re-judges with the
same answers.

- Priority: the first priority (P0, then P1, ...) with a keyword found in
  the title or body as a whole word, case-insensitive - ``debug`` and
  ``bugfix`` do not match ``bug``; a keyword of several words matches with
  any whitespace between them. No keyword: the last priority (P2).
  Issues that already carry a priority label are left alone; pull requests
  get no priority.
- Stale: an issue with no update for ``stale_days``.
- Review: a pull request with neither requested reviewers (users or teams),
  a submitted review, nor assignees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

__all__ = ["DEFAULT_KEYWORDS", "DEFAULT_LABELS", "Item", "Judgement", "Rules", "parse_time"]

#: Priority -> keywords (the issue's defaults); the last priority is the default and needs none.
DEFAULT_KEYWORDS: dict[str, list[str]] = {
    "P0": ["security", "vulnerability", "outage", "data loss", "production down"],
    "P1": ["regression", "crash", "blocker", "bug"],
    "P2": [],
}
#: Priority -> label name (``options.labels`` renames them).
DEFAULT_LABELS: dict[str, str] = {"P0": "P0", "P1": "P1", "P2": "P2"}


def parse_time(text: str | None) -> datetime | None:
    """GitHub's ``2024-05-01T09:00:00Z`` as an aware datetime; None for nothing or nonsense."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class Item:
    """An open issue or pull request, as much as triage reads."""

    number: int
    title: str
    body: str = ""
    labels: tuple[str, ...] = ()
    is_pr: bool = False
    updated_at: str = ""
    state: str = "open"
    assignees: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()  # requested reviewers and teams (pull requests)
    reviewed: bool = False  # a review was submitted (GitHub then drops the reviewer from the requested ones)
    author: str = ""  # who opened it

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Item:
        def logins(rows: Any, key: str = "login") -> tuple[str, ...]:
            return tuple(str(row.get(key)) for row in rows or () if isinstance(row, dict) and row.get(key))

        return cls(
            number=int(data["number"]),
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            labels=tuple(str(label.get("name")) for label in data.get("labels") or () if isinstance(label, dict)),
            is_pr="pull_request" in data and data.get("pull_request") is not None,
            updated_at=str(data.get("updated_at") or ""),
            state=str(data.get("state") or "open"),
            assignees=logins(data.get("assignees")),
            reviewers=logins(data.get("requested_reviewers")) + logins(data.get("requested_teams"), "slug"),
            author=str((data.get("user") or {}).get("login") or "") if isinstance(data.get("user"), dict) else "",
        )


@dataclass
class Judgement:
    """What the rules say about one item: the labels to add and why (one reason per label)."""

    number: int
    priority: str | None = None  # the priority key (P0...), also when the item already has its label
    labelled: bool = False  # already carries a priority label: left alone
    stale: bool = False
    needs_reviewer: bool = False
    add: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)


def _keyword_pattern(keyword: str) -> re.Pattern[str]:
    words = [re.escape(word) for word in keyword.split()]
    return re.compile(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", re.IGNORECASE)


class Rules:
    """The judgements of ``options``: priority keywords, label names, stale days, extra labels.

    ``keywords`` maps each priority to its keywords, highest first; ``labels``
    maps each priority to its label. The last priority is the default.
    """

    def __init__(
        self,
        keywords: Mapping[str, Sequence[str]] | None = None,
        labels: Mapping[str, str] | None = None,
        *,
        stale_days: int = 30,
        stale_label: str | None = "stale",
        review_label: str | None = "needs-reviewer",
    ) -> None:
        self.keywords = {key: list(words) for key, words in (keywords or DEFAULT_KEYWORDS).items()}
        self.labels = {key: (labels or {}).get(key, DEFAULT_LABELS.get(key, key)) for key in self.keywords}
        self.stale_days = stale_days
        self.stale_label = stale_label
        self.review_label = review_label
        self._patterns = {
            key: [(word, _keyword_pattern(word)) for word in words if word.strip()]
            for key, words in self.keywords.items()
        }
        self._by_label = {label.casefold(): key for key, label in self.labels.items()}

    @property
    def priorities(self) -> list[str]:
        return list(self.keywords)

    @property
    def allowed_labels(self) -> list[str]:
        """Every label triage may add: the priority labels, the stale label, the review label."""
        extra = [label for label in (self.stale_label, self.review_label) if label]
        return list(dict.fromkeys([*self.labels.values(), *extra]))

    def priority_label_of(self, labels: Sequence[str]) -> str | None:
        """The priority key of the first priority label among ``labels`` (case-insensitive), if any."""
        for label in labels:
            key = self._by_label.get(label.casefold())
            if key is not None:
                return key
        return None

    def priority(self, title: str, body: str) -> tuple[str, str]:
        """(priority key, why): the first priority with a whole-word keyword in the title, then the body."""
        for key, patterns in self._patterns.items():
            for where, text in (("title", title), ("body", body)):
                for word, pattern in patterns:
                    if pattern.search(text):
                        return key, f'"{word}" in the {where}'
        default = self.priorities[-1]
        return default, "no priority keyword"

    def judge(self, item: Item, now: datetime) -> Judgement:
        verdict = Judgement(number=item.number)
        present = {label.casefold() for label in item.labels}
        if item.is_pr:
            if not item.reviewers and not item.reviewed and not item.assignees:
                verdict.needs_reviewer = True
                if self.review_label and self.review_label.casefold() not in present:
                    verdict.add.append(self.review_label)
                    verdict.why.append("pull request without reviewers or assignees")
            return verdict
        existing = self.priority_label_of(item.labels)
        if existing is not None:
            verdict.priority, verdict.labelled = existing, True
        else:
            key, why = self.priority(item.title, item.body)
            verdict.priority = key
            verdict.add.append(self.labels[key])
            verdict.why.append(f"{self.labels[key]}: {why}")
        updated = parse_time(item.updated_at)
        if updated is not None and now - updated >= timedelta(days=self.stale_days):
            verdict.stale = True
            if self.stale_label and self.stale_label.casefold() not in present:
                verdict.add.append(self.stale_label)
                verdict.why.append(f"no update for {(now - updated).days} days")
        return verdict
