"""The loop_engine components of ``daily-triage``: planner, actor, evaluator and the allowed-actions gate.

The plan (made by ``TriagePlanner`` after discovery)::

    propose -> recheck -> change-<N> (one per proposed change) ... -> report

- ``propose`` writes the full table, remembers what was seen (so the next
  run skips what nothing changed since) and asks one human review, whose
  proposal (``report.proposal_of``) holds every proposed change.
- ``recheck`` (after the decision) reads what changed on GitHub since the
  proposal; each ``change-<N>`` applies its labels unless the reviewer
  skipped it, the issue was closed, or someone labelled it since - those are
  skipped and reported, never forced. A long apply re-reads what changed
  every ``recheck_every`` seconds.
- ``report`` counts and saves the report (JSON and markdown) and, with
  ``report_issue``, posts it there.

Components keep nothing between steps in attributes: what a step needs from
earlier ones is in its metadata (written by the planner) or the observations.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loop_engine.components import ListPlanner
from loop_engine.types import Evaluation, LoopContext, Observation, Plan, Step

from adapters.channel import ChannelError
from adapters.github.render import run_marker

from .github import TriageGitHub
from .review import ALLOWED_ACTIONS, REFUSED_ACTIONS, AllowedActionsGate, modification_problem, modifications
from .report import proposal_markdown, proposal_of, report_line, report_markdown, write_pair
from .rules import Item, Rules, parse_time
from .state import after_own_writes, load_seen, ours_label, save_seen, seen_entry

__all__ = ["AllowedActionsGate", "TriageActor", "TriageEvaluator", "TriagePlanner", "modification_problem",
           "modifications",
           "ALLOWED_ACTIONS", "REFUSED_ACTIONS"]

log = logging.getLogger("bot.patterns.triage")

#: How the issue loopbot opens for a run begins (its marker, without the run's id).
RUN_MARKER = run_marker("").removesuffix(" -->")

def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TriagePlanner(ListPlanner):
    """Discovers open issues and PRs (paginated), skips what nothing changed since the last run, plans the changes."""

    def __init__(self, settings: Mapping[str, Any], rules: Rules, github: Callable[[], TriageGitHub],
                 folder: Callable[[], Path], clock: Callable[[], datetime], *,
                 own_issues: frozenset[int] = frozenset()) -> None:
        super().__init__(["propose", "recheck", "report"])
        self.own_issues = own_issues
        self.settings = settings
        self.rules = rules
        self.github = github
        self.folder = folder
        self.clock = clock

    def _ours(self, item: Item, gh: TriageGitHub, me: list[str | None]) -> bool:
        """An issue loopbot posts its reviews on: configured in ``review.post_to``, or one it opened for a run."""
        if item.number in self.own_issues:
            return True
        if not item.body.lstrip().startswith(RUN_MARKER):
            return False
        if not me:  # asked once, and only when an issue carries the marker
            try:
                me.append(gh.me().login)
            except ChannelError as err:
                log.warning("triage %s: cannot tell loopbot's own login (%s); an issue starting with loopbot's "
                            "run marker is taken as loopbot's", self.settings["repository"], err)
                me.append(None)
        return me[0] is None or item.author.casefold() == me[0].casefold()

    def create_plan(self, goal: str, initial_context: dict[str, Any]) -> Plan:
        gh = self.github()
        now = self.clock()
        rows = gh.open_items()
        me: list[str | None] = []
        items = [item for item in map(Item.from_json, rows) if not self._ours(item, gh, me)]
        seen = load_seen(self.folder())

        def unchanged(item: Item) -> dict[str, Any] | None:
            before = seen.get(str(item.number))
            return before if before is not None and before.get("updated_at") == item.updated_at else None

        def as_judged(item: Item) -> Item:
            """The item as a person last left it: loopbot's own label writes do not make it recent."""
            before = unchanged(item)
            if before is None:
                return item
            return replace(item, updated_at=str(before.get("activity_at") or item.updated_at),
                           reviewed=bool(before.get("reviewed")))

        if any(item.is_pr and not item.assignees for item in items):  # reviewers are only on the pulls endpoint
            requested = {int(pr["number"]): Item.from_json(pr).reviewers for pr in gh.open_pulls()}
            items = [replace(i, reviewers=requested.get(i.number, ())) if i.is_pr else i for i in items]
        items = [as_judged(item) if unchanged(item) else item for item in items]
        judged = {item.number: self.rules.judge(item, now) for item in items}
        for index, item in enumerate(items):  # a submitted review drops the reviewer from the requested ones
            if judged[item.number].needs_reviewer and unchanged(item) is None and gh.reviewed(item.number):
                items[index] = replace(item, reviewed=True)
                judged[item.number] = self.rules.judge(items[index], now)
        real = {str(row.get("number")): str(row.get("updated_at") or "") for row in rows}

        def changed(item: Item) -> bool:
            before = unchanged(item)
            if before is None:
                return True
            return judged[item.number].stale and not before.get("stale")  # went stale since

        fresh = [item for item in items if changed(item)]
        order = {key: n for n, key in enumerate(self.rules.priorities)}
        proposals = [item for item in fresh if judged[item.number].add]
        proposals.sort(key=lambda i: (i.is_pr, order.get(judged[i.number].priority or "", 99), i.number))
        cap = int(self.settings["max_changes"])
        kept, left = proposals[:cap], proposals[cap:]
        left_out = {item.number for item in left}
        priorities = {self.rules.labels[key]: 0 for key in self.rules.priorities}
        for item in items:
            verdict = judged[item.number]
            if not item.is_pr and verdict.priority is not None:
                priorities[self.rules.labels[verdict.priority]] += 1
        proposed_labels: dict[str, int] = {}
        for item in kept:
            for label in judged[item.number].add:
                proposed_labels[label] = proposed_labels.get(label, 0) + 1
        overview = {
            "open_issues": sum(1 for i in items if not i.is_pr),
            "open_prs": sum(1 for i in items if i.is_pr),
            "changed": len(fresh),
            "priorities": priorities,
            "stale": sum(1 for i in items if judged[i.number].stale),
            "prs_needing_reviewers": sum(1 for i in items if judged[i.number].needs_reviewer),
            "proposed_labels": proposed_labels,
            "left_for_next_run": len(left),
            "discovery_calls": gh.calls,
        }
        table = [{"number": i.number, "title": i.title[:200], "is_pr": i.is_pr,
                  "labels": judged[i.number].add, "why": judged[i.number].why} for i in kept]
        remember = {str(i.number): seen_entry(real[str(i.number)], i, judged[i.number].stale)
                    for i in fresh if i.number not in left_out}
        steps = [Step(id="propose", description=f"Propose {len(kept)} change(s) and ask for a review",
                      metadata={"kind": "propose", "action": "propose", "table": table, "overview": overview,
                                "seen": remember, "proposed_at": iso(now)})]
        change_ids: list[str] = []
        if kept:
            steps.append(Step(id="recheck", description="Re-read what changed on GitHub since the proposal",
                              dependencies=["propose"],
                              metadata={"kind": "recheck", "action": "read", "since": iso(now)}))
            for index, item in enumerate(kept, start=1):
                step_id = f"change-{item.number}"
                change_ids.append(step_id)
                steps.append(Step(
                    id=step_id, description=f"Label #{item.number} {', '.join(judged[item.number].add)}",
                    dependencies=["recheck"],
                    metadata={"kind": "change", "action": "add_labels", "number": item.number,
                              "labels": judged[item.number].add, "seen_labels": list(item.labels),
                              "is_pr": item.is_pr, "index": index, "total": len(kept),
                              "seen": seen_entry(real[str(item.number)], item, judged[item.number].stale)}))
        steps.append(Step(id="report", description="Report what was applied", dependencies=change_ids or ["propose"],
                          metadata={"kind": "report", "action": "report", "overview": overview,
                                    "proposed": [i.number for i in kept], "since": iso(now)}))
        return Plan(goal=goal, steps=steps, context=dict(initial_context))


def _latest(kind: str, observations: list[Observation]) -> Any:
    for observation in reversed(observations):
        content = observation.content
        if isinstance(content, dict) and content.get("kind") == kind:
            return content
    raise LookupError(f"triage: no output of step {kind!r} yet")


class TriageActor:
    """Does each step's work; after proposing, asks the checkpoint for one review."""

    def __init__(self, settings: Mapping[str, Any], rules: Rules, github: Callable[[], TriageGitHub],
                 folder: Callable[[], Path], run_name: Callable[[], str], checkpoint: Any,
                 gate: AllowedActionsGate, clock: Callable[[], datetime]) -> None:
        self.settings = settings
        self.rules = rules
        self.github = github
        self.folder = folder
        self.run_name = run_name
        self.checkpoint = checkpoint
        self.gate = gate
        self.clock = clock

    def execute(self, step: Step, observations: list[Observation], context: LoopContext) -> Any:
        kind = step.metadata.get("kind")
        if kind == "propose":
            return self._propose(step)
        if kind == "recheck":
            return self._recheck(step.metadata["since"])
        if kind == "change":
            return self._change(step, observations, context)
        if kind == "report":
            return self._report(step, observations, context)
        raise ValueError(f"triage: unknown step {step.id!r}")

    # -- propose ------------------------------------------------------------------------
    def _propose(self, step: Step) -> dict[str, Any]:
        meta = step.metadata
        table, overview = meta["table"], meta["overview"]
        repository = self.settings["repository"]
        folder = self.folder()
        files = write_pair(folder, f"{self.run_name()}-proposal",
                           {"repository": repository, "proposed_at": meta["proposed_at"], "overview": overview,
                            "changes": table}, proposal_markdown(repository, table, overview))
        save_seen(folder, meta["seen"])
        enabled = self.checkpoint is not None and getattr(getattr(self.checkpoint, "config", None), "enabled", True)
        asked = False
        if table and enabled:
            proposal = proposal_of(repository, table, overview)
            self.checkpoint.request_review(proposal.summary, details=proposal)
            asked = True
        log.info("triage %s: proposed %d change(s)%s; full table %s", repository, len(table),
                 ", review requested" if asked else "", files["markdown"])
        return {"kind": "propose", "proposed": len(table), "asked": asked, "files": files}

    # -- re-checking ----------------------------------------------------------------------
    def _recheck(self, since: str) -> dict[str, Any]:
        checked_at = iso(self.clock())
        rows = self.github().changed_since(since)
        current = {str(row["number"]): {"state": row.get("state", "open"),
                                        "labels": [str(x.get("name")) for x in row.get("labels") or []
                                                   if isinstance(x, dict)],
                                        "assignees": len(row.get("assignees") or [])}
                   for row in rows}
        return {"kind": "recheck", "checked_at": checked_at, "current": current}

    def _now_of(self, number: int, observations: list[Observation]) -> tuple[dict[str, Any] | None, str | None]:
        """The newest re-read of ``number`` since the proposal (None: unchanged), and when the last re-read was."""
        key, found, last = str(number), None, None
        for observation in reversed(observations):
            content = observation.content
            if not isinstance(content, dict):
                continue
            reread = content.get("recheck") if content.get("kind") == "change" else content
            if not isinstance(reread, dict) or "current" not in reread:
                continue
            last = last or reread["checked_at"]
            if found is None and key in reread["current"]:
                found = reread["current"][key]
            if content.get("kind") == "recheck":
                break
        return found, last

    # -- one change ------------------------------------------------------------------------
    def _change(self, step: Step, observations: list[Observation], context: LoopContext) -> dict[str, Any]:
        meta = step.metadata
        number, labels = int(meta["number"]), list(meta["labels"])
        out: dict[str, Any] = {"kind": "change", "number": number}
        propose = _latest("propose", observations)
        refreshed = self._maybe_refresh(observations)
        if refreshed is not None:
            out["recheck"] = refreshed
        skip, overrides = modifications(context.initial_context)
        reason = None
        if not propose.get("asked") and not self.settings["apply_without_review"]:
            reason = "not reviewed: the loop's checkpoint is disabled (apply_without_review is false)"
        elif number in skip:
            reason = "skipped by the reviewer"
        elif number in overrides:
            labels = overrides[number]
            problem = self.gate.problem("add_labels", labels)
            if problem is not None:
                reason = f"the reviewer's label.#{number} was refused: {problem}"
        if reason is None:
            current, _ = self._now_of(number, observations)
            reason = self._changed_since(meta, current)
        if reason is None:
            present = set(meta["seen_labels"])
            missing = [label for label in labels if label not in present]
            if missing:
                self.github().add_labels(number, missing)
                out["applied"] = missing
                if isinstance(meta.get("seen"), dict):  # for the report to remember after loopbot's own write
                    out["seen"] = {**meta["seen"], "labels": [*meta["seen_labels"], *missing]}
            else:
                reason = "already labelled"
        if reason is not None:
            out["skipped"] = reason
        self._progress(meta)
        return out

    @staticmethod
    def _changed_since(meta: Mapping[str, Any], current: Mapping[str, Any] | None) -> str | None:
        """Why the issue as it is now no longer takes the proposed change, if it does not."""
        if current is None:
            return None
        if current.get("state") != "open":
            return "closed since the proposal"
        added = [x for x in current.get("labels", []) if x not in set(meta["seen_labels"]) and not ours_label(x)]
        if added:
            return f"labelled since the proposal by someone else ({', '.join(added)})"
        if meta.get("is_pr") and current.get("assignees"):
            return "assigned since the proposal"
        return None

    def _maybe_refresh(self, observations: list[Observation]) -> dict[str, Any] | None:
        _, last = self._now_of(-1, observations)
        moment = parse_time(last)
        if moment is None or (self.clock() - moment).total_seconds() < float(self.settings["recheck_every"]):
            return None
        return self._recheck(last or "")

    def _progress(self, meta: Mapping[str, Any]) -> None:
        index, total = int(meta.get("index", 0)), int(meta.get("total", 0))
        every = int(self.settings["progress_every"])
        if total and (index == total or (every and index % every == 0)):
            log.info("triage %s: %d/%d change(s) done (%d%%)", self.settings["repository"], index, total,
                     100 * index // total)

    # -- report ------------------------------------------------------------------------
    def _report(self, step: Step, observations: list[Observation], context: LoopContext) -> dict[str, Any]:
        meta = step.metadata
        overview = meta["overview"]
        changes = {}
        for observation in observations:
            content = observation.content
            if isinstance(content, dict) and content.get("kind") == "change":
                changes[content["number"]] = content  # a retried step's last output wins
        applied = [{"number": n, "labels": c["applied"]} for n, c in sorted(changes.items()) if "applied" in c]
        skipped = [{"number": n, "reason": c["skipped"]} for n, c in sorted(changes.items()) if "skipped" in c]
        _, overrides = modifications(context.initial_context)
        proposed = set(meta["proposed"])
        notes = [f"label.#{n} ignored: #{n} was not in the proposal" for n in sorted(set(overrides) - proposed)]
        gh = self.github()
        self._remember_own_writes(meta.get("since"), changes)
        report: dict[str, Any] = {
            "repository": self.settings["repository"], "generated_at": iso(self.clock()),
            "priorities": overview["priorities"], "stale": overview["stale"],
            "prs_needing_reviewers": overview["prs_needing_reviewers"], "proposed": len(proposed),
            "applied": len(applied), "skipped": len(skipped), "applied_changes": applied,
            "skipped_changes": skipped, "notes": notes, "left_for_next_run": overview["left_for_next_run"],
            "api_calls": overview["discovery_calls"] + gh.calls,
        }
        stem = f"{self.run_name()}-report"
        report["files"] = {"json": str(self.folder() / f"{stem}.json"), "markdown": str(self.folder() / f"{stem}.md")}
        write_pair(self.folder(), stem, report, report_markdown(report))
        issue = self.settings.get("report_issue")
        if issue:
            gh.comment(int(issue), report_markdown(report, limit=60_000))
        line = report_line(report)
        log.info("%s; report %s", line, report["files"]["markdown"])
        return {"kind": "report", "summary": line, "applied": len(applied), "skipped": len(skipped),
                "priorities": overview["priorities"], "stale": overview["stale"],
                "prs_needing_reviewers": overview["prs_needing_reviewers"], "files": report["files"]}


    def _remember_own_writes(self, since: Any, changes: Mapping[int, Mapping[str, Any]]) -> None:
        """After loopbot labelled issues, remember their new ``updated_at``: its own write is no change by anyone."""
        written = {n: c["seen"] for n, c in changes.items() if "applied" in c and isinstance(c.get("seen"), dict)}
        if written and isinstance(since, str):
            updates = after_own_writes(written, self.github().changed_since(since))
            if updates:
                save_seen(self.folder(), updates)


class TriageEvaluator:
    """Judges each step's outcome by the rules: a change adds only allowed labels, and only those approved."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules

    def evaluate(self, plan: Plan, observations: list[Observation], goal: str, context: LoopContext) -> Evaluation:
        latest = observations[-1]
        step = plan.get_step(latest.step_id) if latest.step_id else None
        content = latest.content if isinstance(latest.content, dict) else {}
        if step is None or step.metadata.get("kind") != "change":
            return Evaluation(score=1.0, passed=True, step_id=latest.step_id)
        number = int(step.metadata["number"])
        applied = content.get("applied")
        if applied is None:
            ok = isinstance(content.get("skipped"), str)
            return Evaluation(score=1.0 if ok else 0.0, passed=ok, step_id=step.id,
                              feedback="" if ok else f"change #{number} neither applied nor skipped")
        skip, overrides = modifications(context.initial_context)
        approved = overrides.get(number, step.metadata["labels"])
        wrong = [x for x in applied if x not in approved or x not in self.rules.allowed_labels]
        if number in skip or wrong:
            feedback = f"#{number}: applied {applied}, approved {approved}" + (" (skipped)" if number in skip else "")
            return Evaluation(score=0.0, passed=False, step_id=step.id, feedback=feedback)
        return Evaluation(score=1.0, passed=True, step_id=step.id)
