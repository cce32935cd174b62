"""The status table tells a reader what each review waits for."""

from __future__ import annotations

from bot.reviews import cast_vote, mark_applied, mark_failed
from bot.status import render_table

from .test_reviews import T0, A, make_review, vote


def test_each_review_state_says_what_happens_next() -> None:
    open_review, decided, failed, applied = (make_review() for _ in range(4))
    for review, rid in ((open_review, "t-1"), (decided, "t-2"), (failed, "t-3"), (applied, "t-4")):
        review.id = rid
    for review in (decided, failed, applied):
        cast_vote(review, vote("local:ann", A), now=T0)
    mark_failed(failed, "unknown step 'x'")
    mark_applied(applied, now=T0)
    table = render_table([], [open_review, decided, failed, applied], "ld")
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("t-")}
    assert rows["t-1"].endswith("ld t-1 approve")
    assert rows["t-2"].endswith("(being applied)")
    assert rows["t-3"].endswith("(could not be applied: see the run's reason)")
    assert "t-4" not in rows  # done: nothing to do
