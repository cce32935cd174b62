"""What each page shows, as plain data for its template: read from the store, cleaned of secrets.

Every text that came from a loop, a voter or a channel's error goes to the
template as data and is escaped there (autoescape); an error text passes
``Scrub`` first, so a page never shows a secret or a path of the server.
The dashboard reads a page of open reviews (``open_reviews(limit=...)``,
oldest first) and ``counts()`` for the total, never every review.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup, escape

from adapters.channel import MessageRef
from adapters.durations import format_duration
from adapters.local_answers import answer_as, answer_lines
from loop_engine.audit import render_state_markdown
from loop_engine.proposal import ChangeList, Link, Table, Text
from loop_engine.review import ReviewRequest

from bot.config import BotConfig
from bot.desk.desk import outcome_text
from bot.review_deadlines import next_deadline
from bot.review_records import Review
from bot.scheduler import build_trigger
from bot.status import target_views
from bot.store.base import RunRecord, Store, StoreError

__all__ = ["Scrub", "PER_PAGE", "dashboard", "review_page", "run_page", "filter_rows"]

log = logging.getLogger(__name__)

#: Open reviews per dashboard page, and failing deliveries shown.
PER_PAGE = 50
#: Ended runs read to find each loop's last result.
RECENT = 100


class Scrub:
    """Takes every secret value and the state dir's path out of a text before a page shows it."""

    def __init__(self, secrets: Iterable[str], paths: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)
        self._paths = sorted({p for p in paths if p and p != "/"}, key=len, reverse=True)

    def __call__(self, text: str | None) -> str:
        if not text:
            return ""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for path in self._paths:
            text = text.replace(path, "state_dir")
        return text


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat(timespec="seconds")


def filter_rows(rows: Sequence[Sequence[str]], query: str) -> list[Sequence[str]]:
    """Rows with a cell containing ``query`` (case-insensitive); every row for an empty query."""
    needle = query.strip().casefold()
    if not needle:
        return list(rows)
    return [row for row in rows if any(needle in cell.casefold() for cell in row)]


def table_body(rows: Iterable[Sequence[str]]) -> Markup:
    """The ``<tr>`` of every row, each cell escaped: one join, where a template loop over
    20,000 cells took most of a 5,000-row page's time."""
    return Markup("\n".join("<tr><td>" + "</td><td>".join(map(escape, row)) + "</td></tr>" for row in rows))


def _section_view(section: Any, query: str) -> dict[str, Any]:
    if isinstance(section, Table):
        rows = filter_rows(section.rows, query)
        return {"kind": "table", "title": section.title, "columns": section.columns, "body": table_body(rows),
                "shown": len(rows), "total": len(section.rows)}
    if isinstance(section, ChangeList):
        return {"kind": "list", "title": section.title, "entries": section.items}
    if isinstance(section, Link):
        return {"kind": "link", "title": section.title, "url": section.url, "text": section.text or section.url}
    assert isinstance(section, Text)
    return {"kind": "text", "title": section.title, "text": section.markdown}


def _answers(config: BotConfig, review: Review, decide_command: str) -> list[dict[str, Any]]:
    """Who may answer on each channel the review reached (local always), and the ways to do it."""
    who = review.policy.reviewers
    kinds = ["local", *dict.fromkeys(str(t.get("key", "")).split(":")[0] for t in review.targets)]
    shown: list[dict[str, Any]] = []
    for kind in dict.fromkeys(k for k in kinds if k in ("local", "slack", "github")):
        if kind == "local":
            as_option, note = answer_as(who.local)
            people = "anyone on the server" if who.anyone else (", ".join(who.local or []) or "nobody")
            how = answer_lines(review.id, decide_command, as_option)
            people = f"{people} ({note})" if note else people
        elif kind == "slack":
            command = config.slack.command if config.slack is not None else "/loopbot"
            names = [*(who.slack_users or []), *(f"group {g}" for g in who.slack_groups or [])]
            people = ", ".join(names) or ("members of the review's channel" if who.anyone else "nobody on Slack")
            how = ["the buttons under the review message", f"{command} approve {review.id}",
                   f"{command} reject {review.id} REASON", "@loopbot approve (in the review's thread)"]
        else:
            names = [*(f"@{u}" for u in who.github_users or []), *(f"team {t}" for t in who.github_teams or [])]
            if who.github_min_permission:
                names.append(f"anyone with {who.github_min_permission} permission")
            people = ", ".join(names) or ("anyone who can comment on the issue" if who.anyone else "nobody on GitHub")
            how = [f"comment /approve {review.id}", "comment /reject REASON", "the label loopbot:approve"]
        shown.append({"channel": kind, "people": people, "how": how})
    return shown


def _message_links(review: Review) -> list[dict[str, str]]:
    """The Slack thread and the GitHub comment of the review, as links a reader can open."""
    links = []
    for raw in review.posts:
        try:
            ref = MessageRef.from_dict(raw)
        except ValueError:
            continue
        if ref.channel == "slack" and ref.data.get("channel") and ref.data.get("ts"):
            ts = str(ref.data.get("thread_ts") or ref.data["ts"]).replace(".", "")
            links.append({"channel": "Slack", "where": ref.target,
                          "url": f"https://slack.com/archives/{ref.data['channel']}/p{ts}"})
        elif ref.channel == "github" and str(ref.data.get("url", "")).startswith("https://"):
            links.append({"channel": "GitHub", "where": ref.target, "url": str(ref.data["url"])})
    return links


def _vote_rows(votes: Iterable[Any]) -> list[dict[str, str]]:
    return [{"voter": v.voter, "decision": v.decision.name.lower(), "feedback": v.feedback,
             "changes": ", ".join(f"{k}={val}" for k, val in v.modifications.items()), "at": _when(v.at),
             "source": v.source} for v in votes]


def review_page(config: BotConfig, store: Store, review: Review, query: str, scrub: Scrub,
                decide_command: str) -> dict[str, Any]:
    """The review page's data: the request, the whole proposal (tables filtered by ``query``), votes, outcome."""
    request = ReviewRequest.from_dict(review.request)
    proposal = request.proposal
    tasks = store.pending_tasks(review.id)
    targets = [{**view, "error": scrub(view["error"])} for view in target_views(review, tasks)]
    return {
        "review": review,
        "request": request,
        "created": _when(review.created_at),
        "deadline": _when(next_deadline(review)),
        "summary": proposal.summary if proposal is not None else "",
        "sections": [_section_view(s, query) for s in proposal.sections] if proposal is not None else [],
        "query": query,
        "answers": _answers(config, review, decide_command) if review.status == "open" else [],
        "approvals": f"{len(review.approvals)} of {review.policy.approvals_required}",
        "votes": _vote_rows(review.votes),
        "history": _vote_rows(review.history),
        "outcome": outcome_text(review) if review.outcome is not None else "",
        "error": scrub(review.error),
        "messages": _message_links(review),
        "targets": targets,
        "state_summary": scrub(_json(request.state_summary)),
        "context": scrub(_json(request.context)),
    }


def _step_rows(state: Any) -> list[dict[str, Any]]:
    plan = state.current_plan
    if plan is None:
        return []
    return [{"id": s.id, "description": s.description, "status": s.status.name.lower(), "attempts": s.attempts,
             "started": _when(s.start_time), "ended": _when(s.end_time)} for s in plan.steps]


def run_page(store: Store, run: RunRecord, scrub: Scrub) -> dict[str, Any]:
    """The run page's data: plan and steps, failures and recoveries, checkpoints and their reviews, the audit."""
    state, unreadable = None, False
    try:
        state = store.load_state(run.id)
    except (StoreError, OSError, ValueError) as err:  # the page says so; the log names what and where
        log.warning("run page %s: the engine state could not be read: %s", run.id, err)
        unreadable = True
    reviews: dict[str, Review] = {}
    checkpoints: list[str] = []
    if state is not None:
        checkpoints = [d.checkpoint_id for d in state.decisions]
        if state.pending_review is not None:
            checkpoints.append(state.pending_review.checkpoint_id)
    for checkpoint in dict.fromkeys(checkpoints):
        with contextlib.suppress(StoreError, OSError, ValueError):
            found = store.review_for_run(run.id, checkpoint)
            if found is not None:
                reviews[checkpoint] = found
    if run.review_id and all(r.id != run.review_id for r in reviews.values()):
        with contextlib.suppress(StoreError, OSError, ValueError):
            found = store.get_review(run.review_id)
            reviews[found.checkpoint_id] = found
    decisions = {d.checkpoint_id: d for d in state.decisions} if state is not None else {}
    return {
        "run": run,
        "created": _when(run.created_at),
        "updated": _when(run.updated_at),
        "reason": scrub(run.reason),
        "result": scrub(_json(run.result)) if run.result else "",
        "state_read": state is not None,
        "unreadable": unreadable,
        "goal": state.current_plan.goal if state is not None and state.current_plan is not None else "",
        "steps": _step_rows(state) if state is not None else [],
        "failures": [{"type": f.type.name.lower(), "message": scrub(f.message), "step": f.step_id or "",
                      "status": f.status.name.lower(), "attempts": f.recovery_attempts, "at": _when(f.timestamp)}
                     for f in (state.failures if state is not None else [])],
        "recoveries": [{"strategy": r.strategy.name.lower(), "executed": r.executed,
                        "success": "" if r.success is None else ("yes" if r.success else "no"),
                        "reason": scrub(r.reason), "at": _when(r.timestamp)}
                       for r in (state.recoveries if state is not None else [])],
        "checkpoints": [{"id": cp, "review": reviews.get(cp),
                         "decision": decisions[cp].decision.name.lower() if cp in decisions else "waiting"}
                        for cp in dict.fromkeys([*checkpoints, *reviews])],
        "stop_reason": scrub(state.stop_reason) if state is not None else "",
        "audit": scrub(render_state_markdown(state, run.id)) if state is not None else "",
    }


def _schedule_text(loop: Any, zone: str) -> str:
    schedule = loop.schedule
    if schedule is None:
        return "on request"
    if schedule.cron:
        return f"cron {schedule.cron} ({schedule.timezone or zone})"
    return f"every {format_duration(schedule.interval)}"


def _next_run(loop: Any, zone: str, now: datetime, known: Mapping[str, datetime | None]) -> str:
    """The scheduler's own next run time when it runs here, else the schedule's next time after ``now``."""
    if loop.name in known:
        return _when(known[loop.name]) or "paused"
    if loop.schedule is None:
        return ""
    with contextlib.suppress(ValueError):
        trigger, _ = build_trigger(loop.schedule, zone)
        return _when(trigger.get_next_fire_time(None, now))
    return ""


def dashboard(config: BotConfig, store: Store, now: datetime, page: int, scrub: Scrub,
              next_runs: Callable[[], Mapping[str, datetime | None]]) -> dict[str, Any]:
    """The dashboard's data: a page of open reviews, runs in progress, loops, failing deliveries."""
    total = store.counts()["open_reviews"]
    pages = max(1, -(-total // PER_PAGE))
    page = min(max(page, 1), pages)
    shown = store.open_reviews(limit=page * PER_PAGE)[(page - 1) * PER_PAGE:]
    reviews = [{"id": r.id, "loop": r.loop, "run": r.run_id, "created": _when(r.created_at),
                "waiting": str(timedelta(seconds=int(max(0.0, (now - r.created_at).total_seconds())))),
                "deadline": _when(next_deadline(r)) or "none",
                "approvals": f"{len(r.approvals)}/{r.policy.approvals_required}"} for r in shown]
    active = store.active_runs()
    last: dict[str, RunRecord] = {}
    for run in [*store.recent_runs(RECENT), *active]:
        if run.loop not in last or run.created_at >= last[run.loop].created_at:
            last[run.loop] = run
    known = dict(next_runs())
    loops = [{"name": loop.name, "schedule": _schedule_text(loop, config.timezone),
              "next": _next_run(loop, config.timezone, now, known),
              "last": last.get(loop.name)} for loop in config.loops]
    tasks, failing_total = store.failing_tasks(PER_PAGE)  # the oldest; a backlog not tried yet is not read
    failing = [{"channel": t.channel, "target": scrub(_target_key(t.payload)), "action": t.action,
                "review": t.review_id or "", "attempts": t.attempts, "error": scrub(t.last_error),
                "next": _when(t.not_before) or "now"} for t in tasks]
    return {"reviews": reviews, "total": total, "page": page, "pages": pages,
            "runs": [{"run": r, "updated": _when(r.updated_at)} for r in active],
            "loops": loops, "failing": failing, "failing_total": failing_total, "now": _when(now)}


def _target_key(payload: Mapping[str, Any]) -> str:
    from adapters.channel import Target

    raw = payload.get("target")
    if isinstance(raw, Mapping):
        with contextlib.suppress(ValueError, TypeError):
            return Target.from_dict(raw).key
    return ""
