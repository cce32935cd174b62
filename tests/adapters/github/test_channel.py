"""GitHubChannel against the fake GitHub server: idempotent posts, updates, labels, answers, failures."""

from __future__ import annotations

import json

import pytest

from adapters.channel import Answer, AnswerKind, Channel, ChannelError, MessageRef, Target
from adapters.github.channel import AWAITING_LABEL, GitHubChannel
from adapters.github.client import GitHubClient, make_client, make_github
from adapters.github.identity import Me
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO, decided, make_post

TARGET = Target("github", repository=REPO, issue=42)


def test_is_a_channel(channel: GitHubChannel) -> None:
    assert isinstance(channel, Channel)
    assert channel.name == "github"


def test_post_request_comments_once_and_labels_the_issue(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    again = channel.post_request(TARGET, make_post())
    comments = fake.comments_on(REPO, 42)
    assert len(comments) == 1
    assert ref == again
    assert ref.channel == "github" and ref.target == "github:octo/ops#42"
    assert ref.data["comment_id"] == comments[0]["id"]
    body = comments[0]["body"]
    assert body.startswith("<!-- loopbot:review=triage-17 -->")
    assert "## Apply 3 labels" in body  # what is asked, first
    assert "@alice, @bob" in body and "needs 1 approval" in body
    assert "`/approve [note]`" in body and "## How to answer" in body
    assert fake.labels_of(REPO, 42) == [AWAITING_LABEL]
    assert ref.matches({"repository": REPO, "issue": 42})
    assert MessageRef.from_dict(json.loads(json.dumps(ref.to_dict()))) == ref


def test_a_new_channel_after_a_crash_finds_its_comment(client: GitHubClient, fake: FakeGitHub) -> None:
    first = GitHubChannel(client, bot_login=fake.bot_login).post_request(TARGET, make_post())
    reborn = GitHubChannel(GitHubClient(make_github(fake.base_url, token="ghp_test")), bot_login=fake.bot_login)
    assert reborn.post_request(TARGET, make_post()) == first
    assert len(fake.calls_to("POST", r"/issues/42/comments$")) == 1


def test_a_marker_in_someone_elses_comment_is_not_ours(channel: GitHubChannel, fake: FakeGitHub) -> None:
    fake.add_comment(REPO, 42, "<!-- loopbot:review=triage-17 -->\nnice try", "mallory")
    ref = channel.post_request(TARGET, make_post())
    assert fake.comments[ref.data["comment_id"]]["user"]["login"] == fake.bot_login


def test_two_targets_two_refs(channel: GitHubChannel, fake: FakeGitHub) -> None:
    fake.add_issue(REPO, 7)
    one = channel.post_request(TARGET, make_post())
    two = channel.post_request(Target("github", repository=REPO, issue=7), make_post())
    assert one != two and one.target != two.target
    assert len(fake.comments_on(REPO, 42)) == len(fake.comments_on(REPO, 7)) == 1


def test_no_issue_opens_one_issue_per_run_and_finds_it_again(client: GitHubClient, fake: FakeGitHub) -> None:
    target = Target("github", repository=REPO)
    ref = GitHubChannel(client).post_request(target, make_post())
    assert len(fake.calls_to("POST", r"/repos/octo/ops/issues$")) == 1
    issue = fake.issues[(REPO, ref.data["issue"])]
    assert issue["title"] == "loopbot: triage run triage-run-4"
    assert "<!-- loopbot:run=triage-run-4 -->" in issue["body"]
    assert [label["name"] for label in issue["labels"]] == ["loopbot", AWAITING_LABEL]
    # a second review of the same run, from a fresh process: same issue, no second issue
    second = GitHubChannel(client).post_request(target, make_post("triage-18"))
    assert second.data["issue"] == ref.data["issue"]
    assert len(fake.calls_to("POST", r"/repos/octo/ops/issues$")) == 1
    # another run gets its own issue
    other = GitHubChannel(client).post_request(target, make_post("triage-19", run_id="triage-run-5"))
    assert other.data["issue"] != ref.data["issue"]


def test_update_edits_the_comment_swaps_labels_and_keeps_outcomes(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    channel.post_update(ref, decided("approve"), "Decided: APPROVE by github:alice at 2026-01-02T10:00:00")
    body = fake.comments[ref.data["comment_id"]]["body"]
    assert "## Outcome" in body and "Decided: APPROVE by github:alice" in body
    assert "How to answer" not in body
    assert fake.labels_of(REPO, 42) == ["loopbot:approved"]
    assert len(fake.comments_on(REPO, 42)) == 1  # a plain decision edits, the voter was answered
    applied = decided("approve", status="applied")
    channel.post_update(ref, applied, "Run triage-run-4 completed")
    channel.post_update(ref, applied, "Run triage-run-4 completed")  # an outbox retry
    body = fake.comments[ref.data["comment_id"]]["body"]
    assert body.index("Decided: APPROVE") < body.index("Run triage-run-4 completed")
    assert body.count("Run triage-run-4 completed") == 1
    replies = [c for c in fake.comments_on(REPO, 42) if c["id"] != ref.data["comment_id"]]
    assert len(replies) == 1 and "Run triage-run-4 completed" in replies[0]["body"]


def test_reminder_is_a_reply_and_leaves_the_review_open(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    channel.post_update(ref, make_post(), "Reminder: review triage-17 is waiting for 1 approval")
    channel.post_update(ref, make_post(), "Reminder: review triage-17 is waiting for 1 approval")
    assert len(fake.comments_on(REPO, 42)) == 2
    assert "How to answer" in fake.comments[ref.data["comment_id"]]["body"]
    assert fake.labels_of(REPO, 42) == [AWAITING_LABEL]


def test_timed_out_rejection_is_labelled_and_announced(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    channel.post_update(ref, decided("reject", timed_out=True), "Timed out: REJECT (default) at 2026-01-03T09:00:00.")
    assert fake.labels_of(REPO, 42) == ["loopbot:rejected"]
    assert len(fake.comments_on(REPO, 42)) == 2


def test_escalation_posts_once_at_the_target(channel: GitHubChannel, fake: FakeGitHub) -> None:
    fake.add_issue("octo/pager", 1)
    target = Target("github", repository="octo/pager", issue=1)
    ref = channel.post_escalation(target, make_post(), "Escalated: review triage-17 waited 8h")
    again = channel.post_escalation(target, make_post(), "Escalated: review triage-17 waited 8h")
    assert ref == again and ref.target == "github:octo/pager#1"
    (comment,) = fake.comments_on("octo/pager", 1)
    assert comment["body"].startswith("<!-- loopbot:escalation=triage-17 -->\n**Escalated: review triage-17")
    assert "## Apply 3 labels" in comment["body"] and "How to answer" in comment["body"]


def test_answer_reacts_and_replies_quoting_the_voter(channel: GitHubChannel, fake: FakeGitHub) -> None:
    vote = fake.add_comment(REPO, 42, "/approve looks fine", "alice")
    respond = {"repository": REPO, "issue": 42, "comment_id": vote["id"], "login": "alice",
               "quote": vote["body"], "key": f"github:comment:{vote['id']}", "created_at": vote["created_at"]}
    answer = Answer(AnswerKind.DECIDED, "Approved: review triage-17 is decided (1 of 1).", "triage-17")
    channel.answer(respond, answer)
    channel.answer(respond, answer)  # an outbox retry
    assert fake.reactions == [(vote["id"], "eyes", fake.bot_login), (vote["id"], "rocket", fake.bot_login)]
    replies = [c for c in fake.comments_on(REPO, 42) if c["id"] != vote["id"]]
    assert len(replies) == 1
    assert "> /approve looks fine" in replies[0]["body"] and "@alice Approved" in replies[0]["body"]


def _vote_on_42(fake: FakeGitHub, login: str) -> dict[str, object]:
    vote = fake.add_comment(REPO, 42, "/approve", login)
    return {"repository": REPO, "issue": 42, "comment_id": vote["id"], "login": login, "quote": "/approve",
            "key": f"github:comment:{vote['id']}", "created_at": vote["created_at"]}


class Ticks:
    """The channel's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


COUNTED = Answer(AnswerKind.COUNTED, "Counted: 1 of 3 approvals.", "triage-17")


def test_answers_to_a_burst_on_one_issue_share_one_listing_and_each_is_posted_once(
        client: GitHubClient, fake: FakeGitHub) -> None:
    ticks = Ticks()
    channel = GitHubChannel(client, bot_login=fake.bot_login, monotonic=ticks)
    votes = [_vote_on_42(fake, login) for login in ("alice", "bob", "carol")]
    for respond in votes:
        channel.answer(respond, COUNTED)
    channel.answer(votes[1], COUNTED)  # an outbox retry within the round: known posted, not listed again
    assert len(fake.calls_to("GET", r"/issues/42/comments")) == 1, "one listing for the round"
    replies = [c for c in fake.comments_on(REPO, 42) if c["user"]["login"] == fake.bot_login]
    assert len(replies) == 3 and all("@" in c["body"] for c in replies)
    ticks.now += 60  # a later round: GitHub is asked again, and the reply found there
    channel.answer(votes[0], COUNTED)
    assert len(fake.calls_to("GET", r"/issues/42/comments")) == 2
    assert len([c for c in fake.comments_on(REPO, 42) if c["user"]["login"] == fake.bot_login]) == 3


def test_an_answer_older_than_the_listing_is_looked_for_again(client: GitHubClient, fake: FakeGitHub) -> None:
    channel = GitHubChannel(client, bot_login=fake.bot_login, monotonic=Ticks())
    later = _vote_on_42(fake, "bob")
    earlier = {**_vote_on_42(fake, "alice"), "created_at": "2001-01-01T00:00:00Z"}
    channel.answer(later, COUNTED)
    channel.answer(earlier, COUNTED)  # its reply may be older than what the first listing covered
    assert len(fake.calls_to("GET", r"/issues/42/comments")) == 2


def test_a_failed_reply_forgets_the_listing_so_a_reply_github_made_anyway_is_found(
        client: GitHubClient, fake: FakeGitHub) -> None:
    channel = GitHubChannel(client, bot_login=fake.bot_login, monotonic=Ticks())
    respond = _vote_on_42(fake, "alice")
    fake.fail("POST", r"/issues/42/comments$", 502)
    with pytest.raises(ChannelError):
        channel.answer(respond, COUNTED)
    made = fake.add_comment(REPO, 42, f"<!-- loopbot:answer={respond['key']}:counted -->\n> /approve",
                            fake.bot_login)  # the 502 came after GitHub wrote it
    channel.answer(respond, COUNTED)
    assert [c["id"] for c in fake.comments_on(REPO, 42) if c["user"]["login"] == fake.bot_login] == [made["id"]]


def test_refused_answer_thumbs_down_and_help_as_code(channel: GitHubChannel, fake: FakeGitHub) -> None:
    vote = fake.add_comment(REPO, 42, "/approve", "eve")
    respond = {"repository": REPO, "issue": 42, "comment_id": vote["id"], "login": "eve", "quote": "/approve",
               "key": "k1"}
    channel.answer(respond, Answer(AnswerKind.REFUSED, "eve may not answer review triage-17\nask alice or bob"))
    assert fake.reactions == [(vote["id"], "eyes", fake.bot_login), (vote["id"], "-1", fake.bot_login)]
    reply = fake.comments_on(REPO, 42)[-1]["body"]
    assert "```text\neve may not answer" in reply


def test_duplicate_gets_no_answer(channel: GitHubChannel, fake: FakeGitHub) -> None:
    channel.answer({"repository": REPO, "issue": 42, "comment_id": 1}, Answer(AnswerKind.DUPLICATE, "seen"))
    assert fake.calls == []


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [
        (403, {"Retry-After": "30"}, 30.0),
        (429, {"Retry-After": "7"}, 7.0),
        (429, {}, 60.0),
    ],
)
def test_rate_limits_become_retry_after(channel: GitHubChannel, fake: FakeGitHub, status: int,
                                        headers: dict[str, str], retry_after: float) -> None:
    fake.fail("POST", r"/issues/42/comments$", status, headers=headers)
    with pytest.raises(ChannelError) as caught:
        channel.post_request(TARGET, make_post())
    assert caught.value.retry_after == retry_after and not caught.value.permanent
    assert len(fake.calls_to("POST", r"/issues/42/comments$")) == 1  # no retry inside the client
    channel.post_request(TARGET, make_post())  # the outbox's retry succeeds, and posts once
    assert len(fake.comments_on(REPO, 42)) == 1


def test_primary_rate_limit_waits_for_reset(fake: FakeGitHub) -> None:
    client = GitHubClient(make_github(fake.base_url, token="t"), clock=lambda: 1_000_000.0)
    fake.fail("GET", r"/issues/42/comments$", 403, message="API rate limit exceeded for installation",
              headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000120"})
    with pytest.raises(ChannelError) as caught:
        GitHubChannel(client).post_request(TARGET, make_post())
    assert caught.value.retry_after == 120.0


def test_server_errors_are_retryable_and_not_retried_inside(channel: GitHubChannel, fake: FakeGitHub) -> None:
    fake.fail("GET", r"/issues/42/comments$", 500, times=2)
    for _ in range(2):
        with pytest.raises(ChannelError) as caught:
            channel.post_request(TARGET, make_post())
        assert not caught.value.permanent and caught.value.retry_after is None
    assert channel.post_request(TARGET, make_post()).data["comment_id"]
    assert len(fake.calls_to("GET", r"/issues/42/comments$")) == 3


@pytest.mark.parametrize("status", [404, 410])
def test_a_deleted_issue_is_permanent(channel: GitHubChannel, fake: FakeGitHub, status: int) -> None:
    if status == 410:
        fake.delete_issue(REPO, 42)
        target = TARGET
    else:
        target = Target("github", repository=REPO, issue=999)
    with pytest.raises(ChannelError) as caught:
        channel.post_request(target, make_post())
    assert caught.value.permanent


def test_connection_refused_is_retryable() -> None:
    client = GitHubClient(make_github("http://127.0.0.1:9", token="t"))
    with pytest.raises(ChannelError) as caught:
        GitHubChannel(client).post_request(TARGET, make_post())
    assert not caught.value.permanent


def test_huge_details_are_cut_below_githubs_cap_naming_no_path(channel: GitHubChannel, fake: FakeGitHub) -> None:
    post = make_post()
    post.request.state_summary["log"] = "x" * 200_000
    ref = channel.post_request(TARGET, post)
    body = fake.comments[ref.data["comment_id"]]["body"]
    assert len(body) < 65_536
    assert "characters left out: of the details" in body and "local-reviews" not in body and "/srv" not in body
    assert "`loopbot:pause`." in body and body.rstrip().endswith("</details>")


def test_acknowledge_puts_eyes_on_the_vote(channel: GitHubChannel, fake: FakeGitHub) -> None:
    vote = fake.add_comment(REPO, 42, "/approve", "alice")
    channel.acknowledge({"repository": REPO, "issue": 42, "comment_id": vote["id"]})
    channel.acknowledge({"repository": REPO, "issue": 42, "comment_id": None})  # a label vote: nothing to react to
    assert fake.reactions == [(vote["id"], "eyes", fake.bot_login)]


def test_concurrent_posts_of_one_review_make_one_comment(channel: GitHubChannel, fake: FakeGitHub) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        refs = list(pool.map(lambda _: channel.post_request(TARGET, make_post()), range(4)))
    assert len(set(json.dumps(r.to_dict(), sort_keys=True) for r in refs)) == 1
    assert len(fake.comments_on(REPO, 42)) == 1


def test_restricted_without_github_reviewers_says_so(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post(reviewers={}, restricted=True, approvals_required=2))
    body = fake.comments[ref.data["comment_id"]]["body"]
    assert "needs 2 approvals of: only the loop's named reviewers" in body


def test_the_issue_stays_awaiting_while_another_review_is_open(channel: GitHubChannel, fake: FakeGitHub) -> None:
    first = channel.post_request(TARGET, make_post("triage-17"))
    channel.post_request(TARGET, make_post("triage-18"))
    channel.post_update(first, decided("reject", "github:bob", "no"), "Decided: REJECT by github:bob - no")
    assert sorted(fake.labels_of(REPO, 42)) == [AWAITING_LABEL, "loopbot:rejected"]


def test_labels_follow_the_outcome_not_the_words_of_its_reason(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    text = "Decided: REJECT by github:bob at 2026-01-02T10:00:00 - not before APPROVE, PAUSE or RETRY"
    channel.post_update(ref, decided("reject", "github:bob", "not before APPROVE, PAUSE or RETRY"), text)
    channel.post_update(ref, decided("reject", "github:bob", status="applied"), "Run triage-run-4 rejected: APPROVE")
    assert fake.labels_of(REPO, 42) == ["loopbot:rejected"]


def test_an_old_pause_label_gives_way_to_the_outcome(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    fake.add_label_event(REPO, 42, "loopbot:paused", fake.bot_login)  # what an older version left
    channel.post_update(ref, decided("approve"), "Decided: APPROVE by github:alice")
    assert fake.labels_of(REPO, 42) == ["loopbot:approved"]


def test_a_new_review_takes_the_previous_outcome_label_away(channel: GitHubChannel, fake: FakeGitHub) -> None:
    first = channel.post_request(TARGET, make_post("triage-17"))
    channel.post_update(first, decided("reject", "github:bob", "no"), "Decided: REJECT by github:bob - no")
    assert fake.labels_of(REPO, 42) == ["loopbot:rejected"]
    channel.post_request(TARGET, make_post("triage-18"))
    assert fake.labels_of(REPO, 42) == [AWAITING_LABEL]


def test_a_label_is_removed_only_when_the_issue_has_it(channel: GitHubChannel, fake: FakeGitHub) -> None:
    ref = channel.post_request(TARGET, make_post())
    fake.issues[(REPO, 42)]["labels"] = []  # a person took the awaiting label off meanwhile
    channel.post_update(ref, decided("retry"), "Decided: RETRY by github:alice")
    channel.post_update(ref, decided("retry", status="applied"), "Run triage-run-4 completed")
    assert fake.calls_to("DELETE", r"/labels/") == []
    assert fake.labels_of(REPO, 42) == ["loopbot:retried"]


def test_github_app_auth_against_the_fake_server(fake: FakeGitHub) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    client = make_client(fake.base_url, app_id=42, private_key=pem, installation_id=9)
    ref = GitHubChannel(client).post_request(TARGET, make_post())
    assert fake.installation_tokens == ["ghs_fake1"]
    assert [c.path for c in fake.calls[:2]] == ["/app", "/app/installations/9/access_tokens"]
    assert all(c.headers["authorization"].startswith("Bearer ") for c in fake.calls[:2])  # the App's JWT
    assert {c.headers["authorization"] for c in fake.calls[2:]} == {"token ghs_fake1"}
    assert client.me() == Me(fake.bot_login, 42)  # the App's bot user, "<slug>[bot]"
    assert fake.comments[ref.data["comment_id"]]["performed_via_github_app"]["id"] == 42
