"""The voter check against long reviewer lists: the same answers in any case, and no fold of the list per vote."""

from __future__ import annotations

import pytest

from bot.desk.authorize import Authorizer, ListMembership
from bot.desk.people import People
from bot.review_records import Reviewers
from bot.review_voters import authorize

LISTED = ["Alice", "BOB", "straße", "U0AAA", "octo-Cat"]
#: (voter name, listed?) - by its case-folded form, as the check has always read names.
VOTERS = [("Alice", True), ("alice", True), ("ALICE", True), ("bob", True), ("Bob", True), ("STRASSE", True),
          ("strasse", True), ("straße", True), ("u0aaa", True), ("U0AAA", True), ("OCTO-cat", True),
          ("carol", False), ("Alic", False), ("U0AAAB", False), ("strase", False)]


def _folded_reference(listed: list[str], name: str) -> bool:
    return name.casefold() in {entry.casefold() for entry in listed}


@pytest.mark.parametrize(("name", "listed"), VOTERS)
def test_a_name_is_listed_in_any_case_as_its_folded_form_says(name: str, listed: bool) -> None:
    assert _folded_reference(LISTED, name) is listed  # the table agrees with the rule it states
    for channel, reviewers in (("local", Reviewers(local=LISTED)), ("slack", Reviewers(slack_users=LISTED)),
                               ("github", Reviewers(github_users=LISTED))):
        assert (authorize(reviewers, f"{channel}:{name}") is None) is listed, (channel, name)


def test_refusals_keep_their_words() -> None:
    assert authorize(Reviewers(local=LISTED), "local:carol") == (
        "carol is not a reviewer of this loop for local votes (review.reviewers.local: "
        "Alice, BOB, straße, U0AAA, octo-Cat)")
    assert authorize(Reviewers(local=[]), "local:carol") == (
        "review.reviewers.local is empty, so nobody may vote locally; add names to it (e.g. local: [alice])")
    assert authorize(Reviewers(slack_users=["U0AAA"], slack_groups=["S0OPS"]), "slack:U0BBB") == (
        "<@U0BBB> is not one of this loop's Slack reviewers (review.reviewers.slack_users / slack_groups); "
        "who may answer: <@U0AAA>, <!subteam^S0OPS>")
    assert authorize(Reviewers(github_users=LISTED), "github:carol") == (
        "@carol is not one of this loop's GitHub reviewers "
        "(review.reviewers.github_users / github_teams / github_min_permission)")


def test_people_are_named_in_any_case() -> None:
    people = People([("Dana", ["slack:U0DANA"]), ("erin", ["slack:U0ERIN"])])
    authorizer = Authorizer({"slack": ListMembership("slack")}, people)
    reviewers = Reviewers(slack_users=["U0AAA"], people=["DANA"])
    assert authorizer.refusal(reviewers, "slack:U0DANA") is None
    assert authorizer.refusal(reviewers, "slack:U0ERIN") == (
        "<@U0ERIN> is not one of this loop's Slack reviewers (review.reviewers.slack_users / slack_groups); "
        "who may answer: <@U0AAA>; people who may answer: DANA")


class _CountedName(str):
    """A reviewer name that counts how often it is case-folded."""

    folds = 0

    def casefold(self) -> str:
        _CountedName.folds += 1
        return super().casefold()


def test_a_vote_by_a_listed_id_folds_no_name_of_a_long_list() -> None:
    listed: list[str] = [_CountedName(f"U{n:07d}") for n in range(1200)]
    _CountedName.folds = 0
    assert authorize(Reviewers(slack_users=listed), "slack:U0000600") is None
    assert _CountedName.folds == 0, "an exact id is found without folding the list"
    assert authorize(Reviewers(slack_users=listed), "slack:u0000007") is None
    assert _CountedName.folds == 8, "another case folds the list only up to its first match"


def test_a_vote_by_someone_no_person_entry_names_folds_no_people_name() -> None:
    authorizer = Authorizer({"slack": ListMembership("slack")}, People([("dana", ["slack:U0DANA"])]))
    reviewers = Reviewers(slack_users=["U0AAA"], people=[_CountedName(f"person{n}") for n in range(1200)])
    _CountedName.folds = 0
    assert authorizer.refusal(reviewers, "slack:U0AAA") is None
    assert _CountedName.folds == 0
