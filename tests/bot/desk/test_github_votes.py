"""The vote path with GitHub's membership: only the review's own issue, permissions there, old comments no answers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adapters.channel import AnswerKind, Identity, Reply
from adapters.commands import parse_command
from adapters.github import Directory
from bot.desk import Authorizer, ListMembership, People, VotePath
from bot.desk.github_wiring import GitHubMembership
from bot.reviews import Review
from bot.store import SqliteStore

from ..runtime_support import FakeClock
from .support import make_review

POST = {"repository": "octo/ops", "issue": 42, "comment_id": 500, "posted_at": "2026-01-02T09:00:10Z"}


class Roles:
    """A ``DirectoryAPI`` answering from a table, recording what was asked."""

    def __init__(self, roles: dict[tuple[str, str], str]) -> None:
        self.roles = roles
        self.asked: list[tuple[str, str]] = []

    def collaborator_permission(self, repository: str, login: str) -> str:
        self.asked.append((repository, login))
        return self.roles.get((repository, login), "none")

    def team_member(self, org: str, team_slug: str, login: str) -> bool:
        return False


def _path(tmp_path: Path, roles: Roles, **reviewers: Any) -> tuple[VotePath, SqliteStore]:
    store = SqliteStore(tmp_path / "state")
    review = make_review(**reviewers)
    review.posts = [{"channel": "github", "data": dict(POST), "target": "github:octo/ops#42"}]
    store.put_review(review)
    people = People([("alice", ["github:alice"])])
    memberships = {"local": ListMembership("local"), "github": GitHubMembership(Directory(roles))}
    return VotePath(store, Authorizer(memberships, people), clock=FakeClock(), people=people), store


def _comment(text: str, login: str, repository: str = "octo/ops", issue: int = 42, comment_id: int = 900) -> Reply:
    context = {"repository": repository, "issue": issue}
    return Reply(Identity("github", login, login), parse_command(text), context=context,
                 dedupe_key=f"github:comment:{comment_id}", respond={**context, "comment_id": comment_id})


def test_permission_is_read_on_the_reviews_repository_and_elsewhere_is_no_answer(tmp_path: Path) -> None:
    roles = Roles({("mallory/sandbox", "mallory"): "admin", ("octo/ops", "mallory"): "read",
                   ("octo/ops", "alice"): "write"})
    votes, store = _path(tmp_path, roles)
    away = votes.handle(_comment("approve demo-1", "mallory", "mallory/sandbox", 1))
    other_issue = votes.handle(_comment("approve demo-1", "alice", "octo/ops", 7))
    assert (away.kind, other_issue.kind) == (AnswerKind.REFUSED, AnswerKind.REFUSED)
    assert "review's own GitHub issue" in away.text and "sandbox" not in away.text
    assert roles.asked == [] and store.get_review("demo-1").votes == []
    assert votes.handle(_comment("approve", "mallory")).kind is AnswerKind.REFUSED  # read on octo/ops
    assert roles.asked == [("octo/ops", "mallory")]
    assert votes.handle(_comment("approve", "alice")).kind is AnswerKind.DECIDED


def test_a_person_named_by_people_still_answers_only_on_the_reviews_issue(tmp_path: Path) -> None:
    votes, store = _path(tmp_path, Roles({}), people=["alice"])  # admitted as a person, with no GitHub role
    assert votes.handle(_comment("approve demo-1", "alice", "octo/ops", 7)).kind is AnswerKind.REFUSED
    assert votes.handle(_comment("approve demo-1", "alice")).kind is AnswerKind.DECIDED


def test_a_comment_or_label_older_than_the_reviews_post_is_no_answer_to_it(tmp_path: Path) -> None:
    votes, store = _path(tmp_path, Roles({("octo/ops", "alice"): "write", ("octo/ops", "bob"): "write"}))
    old = votes.handle(_comment("approve", "alice", comment_id=400))  # a replayed body: a comment before the post
    context = {"repository": "octo/ops", "issue": 42}
    label = Reply(Identity("github", "bob", "bob"), parse_command("approve"), context=context,
                  dedupe_key="github:label:octo/ops#42:loopbot:approve:bob",
                  respond={**context, "comment_id": None, "label_at": "2026-01-02T09:00:09Z"})
    assert (old.kind, votes.handle(label).kind) == (AnswerKind.DUPLICATE, AnswerKind.DUPLICATE)
    assert store.get_review("demo-1").history == []
    same_second = Reply(label.voter, label.command, context=context, dedupe_key=label.dedupe_key,
                        respond={**context, "comment_id": None, "label_at": "2026-01-02T09:00:10Z"})
    assert votes.handle(same_second).kind is AnswerKind.DECIDED


def test_status_on_github_lists_the_reviews_the_voter_may_answer_on_their_repository(tmp_path: Path) -> None:
    votes, _ = _path(tmp_path, Roles({("octo/ops", "alice"): "write", ("octo/ops", "mallory"): "read"}))
    assert "demo-1" in votes.handle(_comment("status", "alice")).text
    assert votes.handle(_comment("status", "mallory", "mallory/sandbox", 1)).text == "no open review is waiting for you"


class PlacesStore(SqliteStore):
    """The SQLite store, counting the look-ups of the reviews open where an answer was given."""

    looked_up = 0

    def open_reviews_posted_at(self, channel: str, where: Mapping[str, Any]) -> list[Review]:
        self.looked_up += 1
        return super().open_reviews_posted_at(channel, where)


def test_a_batch_of_comments_on_one_issue_looks_up_its_open_review_once(tmp_path: Path) -> None:
    store = PlacesStore(tmp_path / "state")
    review = make_review(github_users=["alice", "bob", "carol"])
    review.policy.approvals_required = 5
    review.posts = [{"channel": "github", "data": dict(POST), "target": "github:octo/ops#42"}]
    store.put_review(review)
    votes = VotePath(store, Authorizer({"github": GitHubMembership(Directory(Roles({})))}), clock=FakeClock())
    comments = [_comment("/approve", login, comment_id=900 + n) for n, login in enumerate(["alice", "bob", "carol"])]
    elsewhere = _comment("/approve", "alice", issue=7, comment_id=990)
    answers = votes.handle_many([*comments, elsewhere])
    assert [a.kind for a in answers] == [AnswerKind.COUNTED] * 3 + [AnswerKind.UNKNOWN_REVIEW]
    assert store.looked_up == 2, "once for issue 42's three comments, once for issue 7"
