"""Webhook payloads (the real fixtures) -> Replies: which comments and labels are votes, and their keys."""

from __future__ import annotations

import pytest

from adapters.channel import Identity
from adapters.command_error import CommandError
from adapters.commands import Command
from adapters.github.identity import BotIdentity, Me
from adapters.github.events import delivery_key, replies_from_comment, replies_from_event
from loop_engine.checkpoint import HumanDecision

from .payloads import comment_payload, fixture, label_payload

REPO = "Codertocat/Hello-World"


def test_approve_comment_is_one_reply_with_context_key_and_respond() -> None:
    payload = comment_payload("/approve looks right")
    (reply,) = replies_from_event("issue_comment", payload)
    assert reply.voter == Identity("github", "alice", "alice")
    assert reply.command == Command(HumanDecision.APPROVE, None, "looks right")
    assert reply.review_id is None
    assert reply.context == {"repository": REPO, "issue": 1}
    assert reply.dedupe_key == "github:comment:492700400"
    assert reply.respond["comment_id"] == 492700400 and reply.respond["issue"] == 1
    assert reply.respond["repository"] == REPO and reply.respond["login"] == "alice"


def test_a_named_review_id_is_taken() -> None:
    (reply,) = replies_from_event("issue_comment", comment_payload("/reject triage-17 wrong labels"))
    assert reply.review_id == "triage-17"
    assert isinstance(reply.command, Command) and reply.command.argument == "wrong labels"


@pytest.mark.parametrize(
    "body",
    [
        "I think we should /approve this later",
        "```\n/approve\n```",
        "~~~sh\n/approve\n~~~",
        "> /approve\n\nquoting the docs",
        "<!--\n/approve\n-->",
        "    /approve",  # four spaces: a Markdown code block
        "You are totally right! I'll get this fixed right away.",
    ],
)
def test_commands_only_at_line_start_outside_code_quotes_and_comments(body: str) -> None:
    assert replies_from_event("issue_comment", comment_payload(body)) == []


def test_a_bad_command_is_a_reply_carrying_the_error() -> None:
    (reply,) = replies_from_event("issue_comment", comment_payload("/aprove"))
    assert isinstance(reply.command, CommandError)
    assert "approve" in str(reply.command)


def test_contradictory_commands_are_one_error_reply() -> None:
    (reply,) = replies_from_event("issue_comment", comment_payload("/approve\n/reject no"))
    assert isinstance(reply.command, CommandError)


def test_two_commands_in_one_comment_get_distinct_keys() -> None:
    replies = replies_from_event("issue_comment", comment_payload("/approve triage-1\n/status"))
    assert [r.dedupe_key for r in replies] == ["github:comment:492700400", "github:comment:492700400:2"]


@pytest.mark.parametrize("action", ["edited", "deleted"])
def test_edited_and_deleted_comments_are_ignored(action: str) -> None:
    assert replies_from_event("issue_comment", comment_payload("/approve", action=action)) == []


def test_bots_and_loopbot_itself_are_ignored() -> None:
    assert replies_from_event("issue_comment", comment_payload("/approve", "ci[bot]", kind="Bot")) == []
    own = comment_payload("/approve", "loopbot-user")
    assert replies_from_event("issue_comment", own, bot_login="LoopBot-User") == []
    assert replies_from_event("issue_comment", own, bot_login="someone-else") != []


def test_installation_payload_works_the_same() -> None:
    payload = fixture("issue_comment.created.with-installation")
    payload["comment"]["body"] = "/retry with a smaller batch"
    (reply,) = replies_from_event("issue_comment", payload)
    assert reply.command == Command(HumanDecision.RETRY, None, "with a smaller batch")


@pytest.mark.parametrize(
    ("label", "decision", "argument"),
    [
        ("loopbot:approve", HumanDecision.APPROVE, ""),
        ("loopbot:reject", HumanDecision.REJECT, "rejected by label"),
        ("loopbot:retry", HumanDecision.RETRY, ""),
        ("loopbot:pause", HumanDecision.PAUSE, ""),
    ],
)
def test_vote_labels(label: str, decision: HumanDecision, argument: str) -> None:
    (reply,) = replies_from_event("issues", label_payload(label))
    assert reply.command == Command(decision, None, argument)
    assert reply.voter.id == "alice"
    assert reply.dedupe_key == f"github:label:codertocat/hello-world#1:{label}:alice"  # no delivery id in it
    assert reply.context == {"repository": REPO, "issue": 1}
    assert reply.respond["comment_id"] is None


def test_other_labels_unlabel_and_bot_labels_are_not_votes() -> None:
    assert replies_from_event("issues", label_payload("bug")) == []
    assert replies_from_event("issues", label_payload("loopbot:approved")) == []
    assert replies_from_event("issues", label_payload("loopbot:approve", action="unlabeled")) == []
    assert replies_from_event("issues", label_payload("loopbot:approve", "x[bot]", kind="Bot")) == []


def test_other_events_and_odd_payloads_give_nothing() -> None:
    assert replies_from_event("issues", fixture("issues.opened")) == []
    assert replies_from_event("ping", fixture("ping")) == []
    assert replies_from_event("issue_comment", {"action": "created"}) == []


def test_comment_from_the_rest_api_gives_the_same_reply_as_the_webhook() -> None:
    payload = comment_payload("/approve")
    (hooked,) = replies_from_event("issue_comment", payload)
    (polled,) = replies_from_comment(REPO, 1, payload["comment"], via="poll")
    assert (polled.dedupe_key, polled.command, polled.voter) == (hooked.dedupe_key, hooked.command, hooked.voter)


@pytest.mark.parametrize("login", ["loopbot-user", "someone-else"])
def test_loopbots_own_text_is_no_vote_even_while_its_login_is_unknown(login: str) -> None:
    # a review cut at 65 kB could start a line with /yes; loopbot's comments all begin with its marker
    body = "<!-- loopbot:review=demo-1 -->\n**loopbot review `demo-1`**\n\n/yes\n/approve demo-1"
    assert replies_from_event("issue_comment", comment_payload(body, login)) == []
    assert replies_from_event("issue_comment", comment_payload("  " + body, login), bot_login=None) == []


def test_a_comment_made_through_loopbots_app_is_loopbots_own() -> None:
    payload = comment_payload("/approve", "alice")
    payload["comment"]["performed_via_github_app"] = {"id": 4242, "slug": "loopbot-app"}
    me = BotIdentity(me=Me("loopbot-app[bot]", 4242))
    assert replies_from_event("issue_comment", payload, bot_login=me) == []
    other = BotIdentity(me=Me("other-app[bot]", 7))
    assert replies_from_event("issue_comment", payload, bot_login=other) != []


def test_a_label_carries_the_time_github_gave_it_so_a_replay_can_be_told_apart() -> None:
    payload = label_payload("loopbot:approve")
    payload["issue"]["updated_at"] = "2026-01-02T09:00:05Z"
    (reply,) = replies_from_event("issues", payload)
    assert reply.respond["label_at"] == "2026-01-02T09:00:05Z"
    assert delivery_key([reply]) == f"{reply.dedupe_key}@2026-01-02T09:00:05Z"
    payload["issue"]["updated_at"] = "2026-01-02T10:00:00Z"  # labelled again later (on a later review)
    (later,) = replies_from_event("issues", payload)
    assert later.dedupe_key == reply.dedupe_key  # one vote per person and review, webhook or poller
    assert later.respond["key"] != reply.respond["key"]  # but its own answer, and its own delivery
    assert delivery_key([later]) != delivery_key([reply])
    payload["repository"]["full_name"] = "CODERTOCAT/hello-world"  # GitHub and the config may spell it apart
    (spelled,) = replies_from_event("issues", payload)
    assert spelled.dedupe_key == reply.dedupe_key
