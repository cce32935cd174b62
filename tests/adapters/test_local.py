"""The local channel: one markdown file per review, the decide lines, updates, idempotence."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import pytest

from adapters.channel import Channel, ChannelError, MessageRef, PostOutcome, ReviewPost, Target
from adapters.local import LocalChannel
from adapters.local_answers import answer_lines
from loop_engine.checkpoint import CheckpointTrigger, ReviewRequest
from loop_engine.proposal import Proposal, Table


LOCAL = Target("local")


def make_post(review_id: str = "demo-1", **overrides: object) -> ReviewPost:
    request = ReviewRequest(
        checkpoint_id="checkpoint_0001",
        trigger=CheckpointTrigger.ON_EXTERNAL_REQUEST,
        state_summary={"iteration": 2, "status": "PAUSED", "failures": 0},
        proposed_action="Apply 3 labels",
        timestamp=datetime(2026, 1, 2, 9, 0, 0),
    )
    fields: dict[str, object] = {"review_id": review_id, "loop": "demo", "run_id": "demo-run-1",
                                 "request": request, "reviewers_hint": "local:alice"}
    fields.update(overrides)
    return ReviewPost(**fields)  # type: ignore[arg-type]


@pytest.fixture
def channel(tmp_path: Path) -> LocalChannel:
    return LocalChannel(tmp_path / "reviews")


def test_is_a_channel(channel: LocalChannel) -> None:
    assert isinstance(channel, Channel)
    assert channel.name == "local"


def test_post_request_writes_the_request_and_every_decide_line(channel: LocalChannel) -> None:
    ref = channel.post_request(LOCAL, make_post())
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert text.startswith("<!-- loopbot:review=demo-1 -->\n# Review demo-1: Apply 3 labels\n")
    assert "local:alice" in text
    for line in (
        "loopbot decide demo-1 approve",
        'loopbot decide demo-1 reject --feedback "reason"',
        "loopbot decide demo-1 retry",
        "loopbot decide demo-1 modify --set context.KEY=VALUE",
        "loopbot decide demo-1 pause",
    ):
        assert f"\n{line}\n" in text
    assert ref == MessageRef("local", {"review_id": "demo-1", "file": "demo-1.md"}, "local")
    assert MessageRef.from_dict(ref.to_dict()) == ref


@pytest.mark.parametrize(
    ("hint", "required", "line"),
    [
        ("alice, bob", 2, "\n**Who can answer:** needs 2 of: alice, bob\n"),
        ("alice", 1, "\n**Who can answer:** needs 1 of: alice\n"),
        ("", 3, "\n**Approvals needed:** 3\n"),
    ],
)
def test_the_review_file_says_how_many_approvals_are_needed(
    channel: LocalChannel, hint: str, required: int, line: str
) -> None:
    channel.post_request(LOCAL, make_post(reviewers_hint=hint, approvals_required=required))
    assert line in (channel.directory / "demo-1.md").read_text(encoding="utf-8")


def test_post_request_logs_the_file_and_the_approve_line(
    channel: LocalChannel, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="adapters.local"):
        channel.post_request(LOCAL, make_post())
    [record] = [r for r in caplog.records if r.levelno == logging.INFO]
    message = record.getMessage()
    assert str(channel.directory / "demo-1.md") in message
    assert message.endswith("loopbot decide demo-1 approve")


def test_decide_command_prefix_is_configurable(tmp_path: Path) -> None:
    channel = LocalChannel(tmp_path, decide_command="loopbot decide --config my.yaml")
    channel.post_request(LOCAL, make_post())
    assert "loopbot decide --config my.yaml demo-1 approve" in (tmp_path / "demo-1.md").read_text()
    assert answer_lines("x-1")[0] == "loopbot decide x-1 approve"


def test_post_request_is_idempotent(channel: LocalChannel) -> None:
    first = channel.post_request(LOCAL, make_post())
    content = (channel.directory / "demo-1.md").read_bytes()
    second = channel.post_request(LOCAL, make_post())
    assert first == second
    assert (channel.directory / "demo-1.md").read_bytes() == content
    assert sorted(p.name for p in channel.directory.iterdir()) == ["demo-1.md"]


def test_post_update_appends_once_in_order(channel: LocalChannel) -> None:
    post = make_post()
    ref = channel.post_request(LOCAL, post)
    channel.post_update(ref, post, "Reminder: still waiting")
    channel.post_update(ref, post, "Decided: APPROVE by local:alice at 2026-01-02T10:00:00\nnote: fine")
    # the same update again, as after a crash between posting it and recording that it was posted
    channel.post_update(ref, post, "Decided: APPROVE by local:alice at 2026-01-02T10:00:00\nnote: fine")
    text = (channel.directory / "demo-1.md").read_text()
    updates = text.split("## Updates\n", 1)[1]
    assert updates == (
        "\n- Reminder: still waiting\n"
        "- Decided: APPROVE by local:alice at 2026-01-02T10:00:00\n  note: fine\n"
    )
    assert text.count("## Updates") == 1
    assert "loopbot decide demo-1 approve" in text


def test_post_update_recreates_a_missing_file(channel: LocalChannel) -> None:
    post = make_post()
    channel.post_update(MessageRef("local", {"review_id": "demo-1"}), post, "timed out after 24h: default reject")
    text = (channel.directory / "demo-1.md").read_text()
    assert "# Review demo-1: Apply 3 labels" in text
    assert text.endswith("- timed out after 24h: default reject\n")


def test_post_update_refuses_another_channels_ref(channel: LocalChannel) -> None:
    with pytest.raises(ChannelError, match="cannot update a 'slack' message"):
        channel.post_update(MessageRef("slack", {"ts": "1"}), make_post(), "x")


def test_escalation_is_written_and_logged_as_warning(channel: LocalChannel, caplog: pytest.LogCaptureFixture) -> None:
    post = make_post()
    channel.post_request(LOCAL, post)
    with caplog.at_level(logging.WARNING, logger="adapters.local"):
        ref = channel.post_escalation(LOCAL, post, "Escalated: review demo-1 has had no decision for 8h")
    assert ref == MessageRef("local", {"review_id": "demo-1", "file": "demo-1.md"}, "local")
    text = (channel.directory / "demo-1.md").read_text()
    assert "\n- Escalated: review demo-1 has had no decision for 8h\n" in text
    assert text.count("Escalated") == 1  # the notice is written as given, not prefixed again
    message = caplog.records[-1].getMessage()
    assert "loopbot decide demo-1 approve" in message and message.count("scalated") == 1


@pytest.mark.parametrize("bad", ["../x-1", "a/b-1", "", ".hidden-1"])
def test_unsafe_review_ids_are_refused(channel: LocalChannel, bad: str) -> None:
    with pytest.raises(ChannelError, match="cannot name a file"):
        channel.post_request(LOCAL, make_post(review_id=bad))


def test_unwritable_directory_raises_channel_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ChannelError, match="cannot write review file"):
        LocalChannel(blocker).post_request(LOCAL, make_post())


def test_a_symlinked_review_file_is_not_read_through(channel: LocalChannel, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.txt"
    secret.write_text("not yours\n", encoding="utf-8")
    channel.directory.mkdir(parents=True, exist_ok=True)
    (channel.directory / "demo-1.md").symlink_to(secret)
    with pytest.raises(ChannelError):
        channel.post_update(MessageRef("local", {"review_id": "demo-1"}), make_post(), "Reminder")
    assert secret.read_text(encoding="utf-8") == "not yours\n"


# -- who may answer: --as when the loop lists its local reviewers (issue 13, item 3) -----------------


def test_a_restricted_review_names_its_local_reviewers_in_every_decide_line(
    channel: LocalChannel, caplog: pytest.LogCaptureFixture
) -> None:
    """Who reads the file or the log is unknown: with a list, each line says --as, and who NAME may be."""
    post = make_post(reviewers={"local": ("alice", "bob")}, restricted=True)
    with caplog.at_level(logging.INFO, logger="adapters.local"):
        channel.post_request(LOCAL, post)
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    for line in answer_lines("demo-1", "loopbot decide", " --as NAME"):
        assert f"\n{line}\n" in text
    assert "NAME: one of the local reviewers alice, bob" in text
    [logged] = [r.getMessage() for r in caplog.records if "approve with:" in r.getMessage()]
    assert "\n" not in logged  # one line: the serve's log would show a newline as "\n"
    assert "approve with: loopbot decide demo-1 approve --as NAME (NAME: one of the local reviewers alice, bob" in (
        logged
    )


def test_one_local_reviewer_is_written_into_the_line(channel: LocalChannel) -> None:
    channel.post_request(LOCAL, make_post(reviewers={"local": ("alice",)}, restricted=True))
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert "\nloopbot decide demo-1 approve --as alice\n" in text and "only alice may answer locally" in text


def test_an_open_review_needs_no_as(channel: LocalChannel) -> None:
    channel.post_request(LOCAL, make_post())
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert "--as" not in text and "\nloopbot decide demo-1 approve\n" in text


def test_a_review_closed_to_local_votes_prints_no_decide_line_and_says_where_to_answer(
    channel: LocalChannel, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="adapters.local"):
        channel.post_request(LOCAL, make_post(reviewers={"slack": ("U0AAA",)}, restricted=True))
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert "Nobody may answer locally" in text and "answer in its Slack thread, where the review was posted" in text
    assert "loopbot decide" not in text and "loopbot decide" not in caplog.text
    channel.post_request(LOCAL, make_post("demo-2", reviewers={"github": ("alice",)}, restricted=True))
    assert "answer on its GitHub issue" in (channel.directory / "demo-2.md").read_text(encoding="utf-8")


def test_a_decided_review_keeps_its_updates_but_not_how_to_answer(channel: LocalChannel) -> None:
    post = make_post()
    ref = channel.post_request(LOCAL, post)
    channel.post_update(ref, post, "Reminder: still waiting")
    assert "## How to answer" in (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    channel.post_update(ref, make_post(status="decided"), "Decided: APPROVE by local:alice")
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert "## How to answer" not in text and "loopbot decide" not in text
    assert "- Reminder: still waiting\n- Decided: APPROVE by local:alice\n" in text
    assert "# Review demo-1: Apply 3 labels" in text and "## Outcome\n\nThis review is decided." in text


# -- the order a person reads (issue 18, item 2) -----------------------------------------------------------------------


def test_the_file_reads_what_is_asked_the_proposal_how_to_answer_then_the_details(channel: LocalChannel) -> None:
    post = make_post()
    post.request.context["reason"] = "apply the labels"
    post.request.state_summary.update(cost_used=0.0, tokens_used=0, execution_state="waiting_for_human")
    post.request.proposal = Proposal("Approve to apply 2 label changes to octo/ops",
                                     [Table(["issue", "labels"], [["#1", "P1"], ["#2", "bug"]], title="Changes")])
    channel.post_request(LOCAL, post)
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    order = ["# Review demo-1: Approve to apply 2 label changes to octo/ops", "### Changes", "| #2 | bug |",
             "## How to answer", "\nloopbot decide demo-1 approve\n", "## Details", "- **Loop:** demo",
             "- **Asked because:** the loop asked for a decision", "- **Iteration:** 2",
             "- **Loop state:** waiting for a person", "| reason | apply the labels |"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "Cost" not in text and "Tokens" not in text and "ON_EXTERNAL_REQUEST" not in text
    assert "waiting_for_human" not in text


def test_a_decided_file_shows_who_decided_and_why(channel: LocalChannel) -> None:
    ref = channel.post_request(LOCAL, make_post())
    decided = make_post(status="decided", outcome=PostOutcome("reject", ("github:bob",), "not before APPROVE"))
    channel.post_update(ref, decided, "Decided: REJECT by github:bob - not before APPROVE")
    text = (channel.directory / "demo-1.md").read_text(encoding="utf-8")
    assert "## Outcome\n\n**Rejected** by github:bob: not before APPROVE\n" in text
    assert "waiting for a person" not in text and "paused for this review" not in text
