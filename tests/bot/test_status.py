"""The status table tells a reader what each review waits for."""

from __future__ import annotations

from loop_engine.review import HumanDecision

from bot.review_records import Reviewers, Vote
from bot.reviews import cast_vote, mark_applied, mark_failed
from bot.status import render_table, review_view
from bot.store.base import RunRecord

from .test_reviews import T0, A, make_review, vote


def rows_of(table: str) -> dict[str, str]:
    return {line.split()[0]: line for line in table.splitlines() if line.startswith("t-")}


def test_each_review_state_says_what_happens_next() -> None:
    open_review, decided, failed, applied = (make_review() for _ in range(4))
    for review, rid in ((open_review, "t-1"), (decided, "t-2"), (failed, "t-3"), (applied, "t-4")):
        review.id = rid
    for review in (decided, failed, applied):
        cast_vote(review, vote("local:ann", A), now=T0)
    mark_failed(failed, "unknown step 'x'")
    mark_applied(applied, now=T0)
    rows = rows_of(render_table([], [open_review, decided, failed, applied], "ld", serving=True))
    assert rows["t-1"].endswith("ld t-1 approve")
    assert rows["t-2"].endswith("(being applied)")
    assert rows["t-3"].endswith("(could not be applied: see the run's reason)")
    assert "t-4" not in rows  # done: nothing to do


def test_a_decided_review_while_no_server_runs_waits_for_serve() -> None:
    decided = make_review()
    decided.id = "t-2"
    cast_vote(decided, vote("local:ann", A), now=T0)
    assert rows_of(render_table([], [decided], "ld"))["t-2"].endswith(
        "(applied by `loopbot apply`, or when `loopbot run` or `serve` starts)")


def test_the_reason_of_a_failed_run_is_shown_whole() -> None:
    """ANSWER WITH sends the reader to the run's reason: it must say all of it."""
    steps = ", ".join(f"step_{n}" for n in range(1, 21))
    reason = f"review t-3's modify could not be applied: unknown step 'x'; the plan has {steps}"
    run = RunRecord(id="t-run-3", loop="t", status="failed", created_at=T0, updated_at=T0, trigger="cli",
                    reason=f"{reason}\nand a second line")
    table = render_table([run], [])
    assert f"{reason} and a second line" in table  # whole, and on one line


def test_the_answer_line_says_as_name_only_for_someone_who_cannot_vote_locally() -> None:
    review = make_review(reviewers=Reviewers(local=["alice", "bob"]))
    review.id = "t-1"
    assert rows_of(render_table([], [review], "ld", voter="alice"))["t-1"].endswith("ld t-1 approve")
    assert rows_of(render_table([], [review], "ld", voter="root"))["t-1"].endswith(
        "ld t-1 approve --as NAME (NAME: one of the local reviewers alice, bob)"
    )
    review.policy.reviewers = Reviewers(local=["alice"])
    assert rows_of(render_table([], [review], "ld", voter="root"))["t-1"].endswith(
        "ld t-1 approve --as alice (only alice may answer locally)"
    )


def test_a_review_nobody_may_answer_locally_gets_no_decide_line_but_where_to_answer() -> None:
    """The vote path refuses `decide` when the loop lists no local reviewers: status must not offer it (#18)."""
    review = make_review(reviewers=Reviewers(github_users=["alice"], slack_users=["U0AAA"]))
    review.id = "t-1"
    review.targets = [{"key": "local"}, {"key": "github:octo/ops#42"}]
    assert "github:octo/ops#42" in rows_of(render_table([], [review], "ld"))["t-1"]
    review.posts = [
        {"channel": "github", "target": "github:octo/ops#42",
         "data": {"url": "https://github.com/octo/ops/issues/42#issuecomment-9"}},
        {"channel": "slack", "target": "slack:C0123", "data": {"channel": "C0123", "ts": "1.2"}},
    ]
    for voter in (None, "alice", "root"):
        row = rows_of(render_table([], [review], "ld", voter=voter))["t-1"]
        assert " decide" not in row and "ld t-1" not in row
        assert row.endswith("answer on GitHub (https://github.com/octo/ops/issues/42#issuecomment-9) "
                            "or in its Slack thread (channel C0123), where the review was posted.")
    review.policy.reviewers = Reviewers(local=[], github_users=["alice"])  # local: [] is nobody, as authorize says
    assert "ld t-1" not in rows_of(render_table([], [review], "ld", voter="alice"))["t-1"]


def test_the_json_view_shows_what_each_modify_vote_and_the_outcome_would_change() -> None:
    review = make_review()
    change = {"context": {"note": "x"}}
    cast_vote(review, Vote("local:ann", HumanDecision.MODIFY, modifications=change), now=T0)
    view = review_view(review)
    assert view["votes"][0]["modifications"] == change and view["outcome"]["modifications"] == change


def test_a_run_left_running_with_no_server_says_the_next_serve_continues_it() -> None:
    """Issue 13 item 7: a shutdown leaves the run `running`; the reader learns what moves it on."""
    run = RunRecord(id="t-run-1", loop="t", status="running", created_at=T0, updated_at=T0, trigger="cli")
    idle = render_table([run], [])
    assert "t-run-1" in idle
    assert "interrupted: `loopbot apply` (or the next `run` or `serve`) continues it from its last saved step" in idle
    assert "interrupted" not in render_table([run], [], serving=True)  # a server is running it
    done = RunRecord(id="t-run-2", loop="t", status="completed", created_at=T0, updated_at=T0, trigger="cli")
    assert "interrupted" not in render_table([done], [])
