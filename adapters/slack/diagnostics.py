"""What the engine knew when it asked, in words for people: the review's collapsed context block.

The reviewer decides on the proposal; the trigger, iteration, state and
failures are there for whoever wants to know why the loop stopped, so they
come last, small (a context block), and bounded: each part is cut to
``MAX_PART`` (with "…"), lists show their latest few and say how many more
there are. Enum names become words ("waiting for a person", not
``WAITING_FOR_HUMAN``); cost and tokens appear only when a loop spent some;
once the review is decided, the state it was in while waiting is left out
(it is no longer true).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from adapters.channel import ReviewPost
from adapters.review_text import asked_because, words

from .limits import cut
from .mrkdwn import inert, to_mrkdwn

__all__ = ["MAX_PART", "diagnostics"]

#: The longest of the context block's parts.
MAX_PART = 900
#: How much of one loop-provided value (a failure message, a context value) is shown.
MAX_VALUE = 300
MAX_FAILURES = 5
MAX_LISTED = 10

#: Shown in parts of their own, or not at all once decided (the loop's status and state).
_OWN = ("iteration", "status", "execution_state", "plan_progress", "current_step", "unrecovered_failures",
        "failures", "cost_used", "tokens_used")


def _show(value: Any) -> str:
    """A value as one escaped, bounded line."""
    if value is None:
        shown = "-"
    elif isinstance(value, str):
        shown = value
    elif isinstance(value, datetime):
        shown = value.isoformat()
    else:
        shown = json.dumps(value, ensure_ascii=False, default=repr)
    return to_mrkdwn(cut(" ".join(shown.split()), MAX_VALUE))


def _label(key: str) -> str:
    return inert(cut(" ".join(key.replace("_", " ").split()).capitalize(), 80))


def _spent(summary: dict[str, Any]) -> list[str]:
    parts = []
    cost, tokens = summary.get("cost_used"), summary.get("tokens_used")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and cost:
        parts.append(f"cost {cost:g}")
    if isinstance(tokens, int | float) and not isinstance(tokens, bool) and tokens:
        parts.append(f"{tokens:,} tokens")
    return parts


def _state(summary: dict[str, Any], is_open: bool) -> str:
    parts = []
    if summary.get("iteration") is not None:
        parts.append(f"iteration {_show(summary['iteration'])}")
    if summary.get("plan_progress"):
        parts.append(f"plan {_show(summary['plan_progress'])}")
    if summary.get("current_step"):
        parts.append(f"step {_show(summary['current_step'])}")
    if is_open:
        state = summary.get("execution_state") or summary.get("status")
        if isinstance(state, str) and state:
            parts.append(f"loop {_show(words(state))}")
    parts += _spent(summary)
    return " · ".join(parts)


def _fitting(entries: list[str], separator: str, room: int) -> list[str]:
    """The leading ``entries`` that fit in ``room`` characters together (at least one, cut to fit)."""
    kept: list[str] = []
    used = 0
    for entry in entries:
        if kept and used + len(separator) + len(entry) > room:
            break
        kept.append(cut(entry, room))
        used += len(separator) + len(entry)
    return kept


def _failure(failure: Any) -> str:
    if not isinstance(failure, dict):
        return f"• {_show(failure)}"
    kind = _show(words(str(failure.get("type") or "failure")))
    step = f" at step {_show(failure['step'])}" if failure.get("step") else ""
    return f"• {kind}{step}: {_show(failure.get('message', ''))}"


def _failures(summary: dict[str, Any]) -> str:
    failures = summary.get("unrecovered_failures") or []
    if not isinstance(failures, list) or not failures:
        return ""
    latest = [_failure(f) for f in reversed(failures[-MAX_FAILURES:])]
    shown = list(reversed(_fitting(latest, "\n", MAX_PART - 60)))
    more = f", the latest {len(shown)} here" if len(failures) > len(shown) else ""
    return "\n".join([f"{len(failures)} unrecovered failure{'s' if len(failures) != 1 else ''}{more}:", *shown])


def _listed(items: list[tuple[str, Any]]) -> str:
    entries = [f"{_label(key)}: {_show(value)}" for key, value in items[:MAX_LISTED]]
    shown = _fitting(entries, " · ", MAX_PART - 30)
    if len(items) > len(shown):
        shown.append(f"…and {len(items) - len(shown)} more")
    return " · ".join(shown)


def diagnostics(post: ReviewPost, is_open: bool) -> list[str]:
    """The context block's parts: where and why, the loop's state, its failures, the rest of what it said."""
    request = post.request
    summary = request.state_summary
    trigger = asked_because(request.trigger.name)
    where = (f"Loop {inert(post.loop)} · run `{inert(post.run_id)}` · review `{inert(post.review_id)}` · "
             f"asked because {trigger}")
    reason = request.context.get("reason")
    asked_reason = request.proposal is None and isinstance(reason, str) and bool(reason.strip())
    if request.proposed_action and (request.proposal is not None or asked_reason):  # else it is what is asked
        where += f" · next: {_show(request.proposed_action)}"
    others = [(k, v) for k, v in summary.items() if k not in _OWN]
    others += [(str(k), v) for k, v in request.context.items() if not (k == "reason" and asked_reason)]
    parts = [where, _state(summary, is_open), _failures(summary), _listed(others)]
    return [cut(part, MAX_PART) for part in parts if part]
