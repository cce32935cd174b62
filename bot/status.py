"""What ``loopbot status`` shows: runs and reviews as a table or as JSON.

The JSON shape is a contract people script against (docs/commands.md, ``--json``): keys may be
added, never renamed. Nothing here reads config, so no secret can reach it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from adapters.local_answers import answer_as, answer_elsewhere, answer_lines, local_votes_count

from bot.review_voters import authorize
from bot.review_records import Review
from bot.store.base import OutboxTask, RunRecord

__all__ = ["run_view", "review_view", "render_json", "render_table", "render_page_links", "where_to_answer"]

#: What the ANSWER WITH column says of a review no longer open.
_NOT_OPEN = {"decided": "(being applied)", "failed": "(could not be applied: see the run's reason)"}
#: ... of a decided review while no server runs: only `serve` applies decisions.
_NOT_SERVING = "(applied by `loopbot apply`, or when `loopbot run` or `serve` starts)"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="seconds")


def run_view(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "loop": run.loop,
        "status": run.status,
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "review": run.review_id,
        "trigger": run.trigger,
        "iterations": run.iterations,
        "reason": run.reason,
        "result": run.result,
    }


def target_views(review: Review, tasks: Sequence[OutboxTask] = ()) -> list[dict[str, Any]]:
    """Each place the review goes, whether it got there, and the last error of a delivery still trying."""
    posted = {p.get("target") or p.get("channel") for p in review.posts}
    waiting = {_entry_key(t): t for t in tasks if t.review_id == review.id and t.action in ("post", "escalate")}
    views = []
    for entry in review.targets or [{"key": "local", "role": "post"}]:
        key = entry["key"]
        task = waiting.get(key)
        views.append({
            "target": key,
            "role": entry.get("role", "post"),
            "delivered": key in posted,
            "attempts": task.attempts if task is not None else 0,
            "error": task.last_error if task is not None else None,
        })
    return views


def _entry_key(task: OutboxTask) -> str:
    """The key of the review target a post or escalation task delivers to (as ``Review.targets`` has it)."""
    from adapters.channel import Target  # only with deliveries queued: the channel types are not for listing
    from bot.desk.outbox import ESCALATION_PREFIX

    key = Target.from_dict(task.payload["target"]).key
    return ESCALATION_PREFIX + key if task.action == "escalate" else key


def review_view(review: Review, tasks: Sequence[OutboxTask] = ()) -> dict[str, Any]:
    outcome = review.outcome
    return {
        "id": review.id,
        "run": review.run_id,
        "loop": review.loop,
        "status": review.status,
        "checkpoint": review.checkpoint_id,
        "approvals": len(review.approvals),
        "required": review.policy.approvals_required,
        "votes": [
            {
                "voter": v.voter, "decision": v.decision.name.lower(), "feedback": v.feedback,
                "modifications": v.modifications, "at": _iso(v.at),
            }
            for v in review.votes
        ],
        # every vote as cast, in order (pauses and replaced votes too): the audit trail
        "history": [
            {
                "voter": v.voter, "decision": v.decision.name.lower(), "feedback": v.feedback,
                "modifications": v.modifications, "at": _iso(v.at), "source": v.source,
            }
            for v in review.history
        ],
        "outcome": None if outcome is None else {
            "decision": outcome.decision.name.lower(),
            "decided_by": list(outcome.decided_by),
            "decided_at": _iso(outcome.decided_at),
            "timed_out": outcome.timed_out,
            "feedback": outcome.feedback,
            "modifications": outcome.modifications,
        },
        "timed_out": outcome.timed_out if outcome is not None else review.timed_out_at is not None,
        "created_at": _iso(review.created_at),
        "paused_until": _iso(review.paused_until),
        "applied_at": _iso(review.applied_at),
        "reason": review.error,  # why it failed, or who cancelled its run and why
        "targets": target_views(review, tasks),
    }


def render_json(runs: list[RunRecord], reviews: list[Review], tasks: Sequence[OutboxTask] = (),
                replicas: dict[str, Any] | None = None) -> str:
    """``replicas`` (PostgreSQL only): {"leader": name, "replicas": [{name, leader, heartbeat, ...}]}."""
    document: dict[str, Any] = {"runs": [run_view(r) for r in runs],
                                "reviews": [review_view(r, tasks) for r in reviews]}
    if replicas is not None:
        document["leader"] = replicas["leader"]
        document["replicas"] = replicas["replicas"]
    return json.dumps(document, indent=2)


def render_replicas(replicas: dict[str, Any] | None) -> str:
    """The replicas section of the table (empty off PostgreSQL): who leads, each one's last heartbeat."""
    if replicas is None:
        return ""
    if not replicas["replicas"]:
        return "\n\nno replica has served this database yet"
    rows = [[r["name"], "leader" if r["leader"] else "-", r["heartbeat"][:19] + "Z",
             "" if r.get("fresh", True) else "stale (no heartbeat for a minute)"] for r in replicas["replicas"]]
    return "\n\n" + "\n".join(_table(["REPLICA", "ROLE", "HEARTBEAT", "NOTE"], rows))


def _targets_cell(review: Review, tasks: Sequence[OutboxTask]) -> str:
    """"local ok, slack:C0123 waiting (3 attempts: ratelimited)" - where the review is, and what is stuck."""
    cells = []
    for view in target_views(review, tasks):
        if view["delivered"]:
            cells.append(f"{view['target']} ok")
        elif view["attempts"]:
            cells.append(f"{view['target']} failing ({view['attempts']} attempts: {view['error']})")
        else:
            cells.append(f"{view['target']} pending")
    return ", ".join(cells)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *map(len, column)) for h, column in zip(headers, zip(*rows, strict=True), strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*row).rstrip() for row in rows)]


def _places(review: Review) -> str:
    """Where a review closed to local votes is answered: its GitHub comment's address, its Slack thread."""
    places = []
    for post in review.posts:
        data = post.get("data") or {}
        if post.get("channel") == "github":
            places.append(f"on GitHub ({data.get('url') or post.get('target')})")
        elif post.get("channel") == "slack":
            places.append(f"in its Slack thread (channel {data.get('channel')})")
    if not places:  # not posted yet: where it goes
        places = [str(entry["key"]) for entry in review.targets if entry.get("key") != "local"] or ["in its channel"]
    return " or ".join(places)


def where_to_answer(review: Review) -> str | None:
    """Where to answer a review nobody may answer locally (instead of a decide line it would refuse), else None."""
    reviewers = review.policy.reviewers
    if local_votes_count(reviewers.local, not reviewers.anyone):
        return None
    return answer_elsewhere(_places(review))


def _answer_with(review: Review, decide_command: str, serving: bool, voter: str | None) -> str:
    """The ANSWER WITH cell: the line to paste while open, else what happens next.

    ``--as`` is added only when ``voter`` (who would run the line) may not vote locally, as the
    review file words it (``adapters.local.answer_as``): the one local reviewer, or NAME and the list.
    A review nobody may answer locally gets no line that would be refused, but where to answer.
    """
    if review.status == "decided" and not serving:
        return _NOT_SERVING
    if review.status != "open":
        return _NOT_OPEN.get(review.status, "")
    elsewhere = where_to_answer(review)
    if elsewhere is not None:
        return elsewhere
    reviewers = review.policy.reviewers
    if voter is not None and authorize(reviewers, f"local:{voter}") is None:
        return answer_lines(review.id, decide_command)[0]
    as_option, who = answer_as(reviewers.local)
    line = answer_lines(review.id, decide_command, as_option)[0]
    return f"{line} ({who})" if who else line


#: The REASON of a run left "running" while no server runs: a shutdown (or a kill) stopped it between steps.
INTERRUPTED = "interrupted: `loopbot apply` (or the next `run` or `serve`) continues it from its last saved step"


def _reason(run: RunRecord, serving: bool = True) -> str:
    """The whole reason, on one line: ANSWER WITH sends readers here for why a review failed.

    A run still "running" with no server to run it was interrupted: say what moves it on.
    """
    reason = " ".join((run.reason or "").split())
    if run.status == "running" and not serving:
        return f"{INTERRUPTED}; {reason}" if reason else INTERRUPTED
    return reason


def render_table(
    runs: list[RunRecord],
    reviews: list[Review],
    decide_command: str = "loopbot decide",
    *,
    serving: bool = False,
    voter: str | None = None,
    tasks: Sequence[OutboxTask] = (),
) -> str:
    """``serving``: whether a `loopbot serve` holds the state dir (it applies decided reviews)."""
    lines: list[str] = []
    if runs:
        lines += _table(
            ["RUN", "LOOP", "STATUS", "UPDATED", "REVIEW", "REASON"],
            [[r.id, r.loop, r.status, _iso(r.updated_at) or "", r.review_id or "", _reason(r, serving)] for r in runs],
        )
    else:
        lines.append("no runs yet")
    pending = [r for r in reviews if r.status != "applied"]
    lines.append("")
    if pending:
        lines += _table(
            ["REVIEW", "RUN", "STATUS", "APPROVALS", "VOTES", "POSTED TO", "ANSWER WITH"],
            [
                [
                    r.id, r.run_id, r.status, f"{len(r.approvals)}/{r.policy.approvals_required}",
                    ", ".join(f"{v.voter}:{v.decision.name.lower()}" for v in r.votes) or "-",
                    _targets_cell(r, tasks),
                    _answer_with(r, decide_command, serving, voter),
                ]
                for r in pending
            ],
        )
    else:
        lines.append("no open reviews")
    return "\n".join(lines)


def render_page_links(reviews: Sequence[Review], page_url: Callable[[str], str] | None) -> str:
    """Each open review's web page (a signed link, ``bot.web.links``) below the table; empty with pages off."""
    waiting = [r for r in reviews if r.status == "open"]
    if page_url is None or not waiting:
        return ""
    return "\n\n" + "\n".join(_table(["REVIEW", "PAGE"], [[r.id, page_url(r.id)] for r in waiting]))
