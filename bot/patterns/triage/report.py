"""What people read: the review's proposal (as data), the report, and the files kept beside them.

The review carries the whole proposal - counts, every proposed change as a
table, what each answer does - as a ``loop_engine.proposal.Proposal``, so
each channel lays it out within its own limits. The same table is kept as
``<run>-proposal.md`` and ``.json`` in the loop's folder under
``state_dir/triage/``, for the record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text
from loop_engine.proposal import ChangeList, Proposal, ProposalSection, Table, Text

__all__ = ["ANSWERS", "cell", "proposal_markdown", "proposal_of", "report_markdown", "report_line", "write_pair"]

#: What each answer does to a triage proposal, one line each.
ANSWERS = (
    "approve applies every change above",
    "modify skip=#12,#15 label.#12=P1 applies them without #12 and #15, and #12 as P1 "
    "(skip drops changes, label.#N=L1,L2 replaces #N's labels)",
    "reject applies nothing",
)
HEADER = "| Issue | Title | Proposed labels | Why |\n| --- | --- | --- | --- |"


def cell(text: str, limit: int = 80) -> str:
    """Table-safe text: one line, pipes escaped, at most ``limit`` characters."""
    flat = " ".join(str(text).split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _row(row: Mapping[str, Any], title_limit: int = 80) -> str:
    kind = "PR " if row.get("is_pr") else ""
    return (f"| {kind}#{row['number']} | {cell(row.get('title', ''), title_limit)} | "
            f"{', '.join(row['labels'])} | {cell('; '.join(row.get('why', [])), 120)} |")


def _counts_line(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{label} {n:,}" for label, n in counts.items() if n) or "none"


def proposal_markdown(repository: str, rows: Sequence[Mapping[str, Any]], overview: Mapping[str, Any]) -> str:
    lines = [f"# Triage proposal for {repository}", "",
             f"{len(rows):,} change(s) proposed; labels: {_counts_line(overview.get('proposed_labels', {}))}.", "",
             HEADER]
    lines += [_row(row, 200) for row in rows]
    return "\n".join(lines) + "\n"


def proposal_of(repository: str, rows: Sequence[Mapping[str, Any]], overview: Mapping[str, Any]) -> Proposal:
    """The review's proposal, as data: what approving does, the counts, every proposed change, the answers.

    The whole table travels in the review (each channel lays it out and
    splits it to fit); no path on the server is named, since a reader in
    chat could not open it. Triage only ever adds labels, so the table has
    no column for labels removed.
    """
    n = len(rows)
    counts = overview.get("proposed_labels", {})
    left = int(overview.get("left_for_next_run", 0))
    text = (f"{overview.get('open_issues', 0):,} open issues and {overview.get('open_prs', 0):,} open pull requests, "
            f"{overview.get('changed', 0):,} changed since the last run; {n:,} change(s) proposed, "
            "highest priority first." + (f" {left:,} more are left for the next run." if left else ""))
    table = Table(["Issue", "Title", "Labels to add", "Why"],
                  [[f"{'PR ' if row.get('is_pr') else ''}#{row['number']}", str(row.get("title", "")),
                    ", ".join(row["labels"]), "; ".join(row.get("why", []))] for row in rows],
                  title="Proposed changes")
    sections: list[ProposalSection] = [Text(text, title="Overview"), table]
    if any(counts.values()):
        sections.append(ChangeList([f"{label}: {k:,} issue(s)" for label, k in counts.items() if k],
                                   title="Labels to add"))
    sections.append(ChangeList(list(ANSWERS), title="What each answer does"))
    return Proposal(f"Approve to apply {n:,} label change{'' if n == 1 else 's'} to {repository}", sections)


def report_line(report: Mapping[str, Any]) -> str:
    """One line: what the run did, for logs, the run's result and the review thread."""
    priorities = _counts_line(report.get("priorities", {}))
    return (f"triage of {report['repository']}: applied {report['applied']:,} change(s), skipped "
            f"{report['skipped']:,}; open issues by priority: {priorities}; stale {report.get('stale', 0):,}; "
            f"PRs needing reviewers {report.get('prs_needing_reviewers', 0):,}")


def report_markdown(report: Mapping[str, Any], limit: int | None = None) -> str:
    lines = [f"# Triage report for {report['repository']}", "", report_line(report) + ".", "",
             "| Priority | Open issues |", "| --- | --- |"]
    lines += [f"| {label} | {n:,} |" for label, n in report.get("priorities", {}).items()]
    lines += ["", f"- Stale issues: {report.get('stale', 0):,}",
              f"- Pull requests needing reviewers: {report.get('prs_needing_reviewers', 0):,}",
              f"- API calls: {report.get('api_calls', 0):,}", ""]
    applied = report.get("applied_changes", [])
    skipped = report.get("skipped_changes", [])
    body = ["## Applied", ""] + [f"- #{c['number']}: {', '.join(c['labels'])}" for c in applied]
    body += ["", "## Skipped", ""] + [f"- #{c['number']}: {c['reason']}" for c in skipped]
    for note in report.get("notes", []):
        body.append(f"- {note}")
    text = "\n".join(lines + body) + "\n"
    if limit is not None and len(text) > limit:
        cut = text[: max(limit - 200, 0)].rsplit("\n", 1)[0]
        text = cut + f"\n\n… cut to fit; the full report is {report.get('files', {}).get('markdown', 'in state_dir')}\n"
    return text


def write_pair(folder: Path, stem: str, data: Any, markdown: str) -> dict[str, str]:
    """``stem.json`` and ``stem.md`` in ``folder``, each written atomically; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    json_path, md_path = folder / f"{stem}.json", folder / f"{stem}.md"
    atomic_write_text(json_path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    atomic_write_text(md_path, markdown)
    return {"json": str(json_path), "markdown": str(md_path)}
