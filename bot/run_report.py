"""A run in words: its result in one line, the votes its reviews got, and its audit trail.

What people read about a run - the line posted where its review was, ``status``,
and ``state_dir/runs-md/<run id>.md`` - built from the store alone, so a run
ended by another process or replica reads the same.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text
from loop_engine.markdown import escape_inline

from bot.desk.desk import outcome_text
from bot.reviews import Review, Vote
from bot.store.base import Store, StoreError

__all__ = ["RUNS_MARKDOWN", "history_text", "result_text", "run_markdown", "write_run_markdown"]

log = logging.getLogger("bot.runner")

#: The folder of ``state_dir`` where each ended run's audit trail is written as ``<run id>.md``.
RUNS_MARKDOWN = "runs-md"
#: How much of a run's output its one-line summary quotes.
_OUTPUT_SHOWN = 200
_DONE_STEPS = ("completed", "verified_completed", "skipped")


def result_text(result: dict[str, Any] | None) -> str:
    """A run's result in one line: "4 iterations; 4 of 4 steps done; output: {...}" ("" when there is none).

    The loop's own ``summary`` (``LoopSpec.summarize``, kept in the result at
    the run's end) is shown in place of its output.
    """
    if not result:
        return ""
    parts = []
    if result.get("iterations") is not None:
        parts.append(f"{result['iterations']} iteration(s)")
    steps: dict[str, str] = result.get("steps") or {}
    if steps:
        done = sum(1 for status in steps.values() if status in _DONE_STEPS)
        left = ", ".join(f"{step} {status}" for step, status in steps.items() if status not in _DONE_STEPS)
        parts.append(f"{done} of {len(steps)} steps done" + (f" ({left})" if left else ""))
    output = result.get("output")
    summary = result.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        summary = output.get("summary") if isinstance(output, dict) else None
    if isinstance(summary, str) and summary.strip():  # a loop that words its own result
        parts.append(" ".join(summary.split()))
    elif output is not None:
        shown = json.dumps(output, ensure_ascii=False, default=str)
        parts.append("output: " + (shown if len(shown) <= _OUTPUT_SHOWN else shown[:_OUTPUT_SHOWN] + "..."))
    return "; ".join(parts)


def _vote_line(vote: Vote) -> str:
    when = vote.at.isoformat(timespec="seconds") if vote.at is not None else "?"
    changes = f" {json.dumps(vote.modifications, ensure_ascii=False, default=str)}" if vote.modifications else ""
    note = f" - {vote.feedback}" if vote.feedback else ""
    return f"{when} {vote.voter} {vote.decision.name.lower()}{changes}{note} (via {vote.source})"


def history_text(review: Review) -> str:
    """Every vote cast on ``review``, in order with its time - pauses and replaced votes too ("" if none)."""
    if not review.history:
        return ""
    return "Votes, as cast:\n" + "\n".join(f"- {_vote_line(vote)}" for vote in review.history)


def run_markdown(store: Store, run_id: str, checkpoints: Iterable[str] = ()) -> str:
    """A run's audit trail as markdown: how it ended and why, its result, each review's outcome and votes."""
    run = store.get_run(run_id)
    lines = [
        f"# Run {run.id}",
        "",
        f"- **Loop:** {escape_inline(run.loop)}",
        f"- **Status:** {run.status}" + (f" - {escape_inline(run.reason)}" if run.reason else ""),
        f"- **Trigger:** {escape_inline(run.trigger)}",
        f"- **Started:** {run.created_at.isoformat(timespec='seconds')}",
        f"- **Ended:** {run.updated_at.isoformat(timespec='seconds')}",
    ]
    if result := result_text(run.result):
        lines.append(f"- **Result:** {escape_inline(result)}")
    reviews: dict[str, Review] = {}
    for checkpoint in [*checkpoints, None]:  # each decided checkpoint's review, then the last one
        found = store.review_for_run(run_id, checkpoint)
        if found is not None:
            reviews.setdefault(found.id, found)
    for review in reviews.values():
        lines += ["", f"## Review {review.id} ({escape_inline(review.checkpoint_id)}): {review.status}", ""]
        lines.append(f"- **Opened:** {review.created_at.isoformat(timespec='seconds')}")
        lines.append(f"- **Outcome:** {escape_inline(outcome_text(review))}")
        if review.error and review.status != "cancelled":  # a cancel's words are its outcome, above
            lines.append(f"- **Error:** {escape_inline(review.error)}")
        lines += ["- **Votes, as cast:**", *(f"  - {escape_inline(_vote_line(v))}" for v in review.history)]
        if not review.history:
            lines[-1] += " none"
    return "\n".join(lines) + "\n"



def write_run_markdown(state_dir: str | Path, store: Store, run_id: str, checkpoints: Iterable[str] = ()) -> None:
    """``state_dir/runs-md/<run>.md``: the run's end, result, and each review with its outcome and votes.

    An audit copy: a failure to write it is logged, never fails the run.
    """
    path = Path(state_dir) / RUNS_MARKDOWN / f"{run_id}.md"
    try:
        atomic_write_text(path, run_markdown(store, run_id, checkpoints))
    except (OSError, StoreError) as err:
        log.warning("run %s: could not write its audit file %s: %s", run_id, path, err)
