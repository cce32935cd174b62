"""What people read: the proposal table (whole, and summarised to fit a review), the report, the files.

A review has to fit where it is posted - a GitHub comment holds 65,536
characters, Slack far fewer - so the review shows the counts and the first
rows (highest priority first) within ``limit`` characters, and names the
files holding the full table: ``<run>-proposal.md`` and ``.json`` in the
loop's folder under ``state_dir/triage/``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loop_engine.atomic import atomic_write_text

__all__ = ["MODIFY_HELP", "cell", "proposal_markdown", "proposal_summary", "report_markdown", "report_line",
           "write_pair"]

MODIFY_HELP = (
    "approve applies every change above; "
    "modify context.skip=#12,#15 context.label.#12=P1 applies them without #12 and #15 ... "
    "(skip drops changes, label.#N=L1,L2 replaces #N's labels); reject applies nothing."
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


def proposal_summary(repository: str, rows: Sequence[Mapping[str, Any]], overview: Mapping[str, Any],
                     table_path: str, limit: int) -> str:
    """The review's text: counts, then as many rows as fit in ``limit`` characters, then where the rest is."""
    head = [
        f"Triage of {repository}: {overview.get('open_issues', 0):,} open issues and "
        f"{overview.get('open_prs', 0):,} open pull requests, {overview.get('changed', 0):,} changed since the "
        f"last run. Proposed: {len(rows):,} change(s) - {_counts_line(overview.get('proposed_labels', {}))}.",
        "",
        f"Full table: {table_path} (and .json).",
        "",
        HEADER,
    ]
    tail = ["", MODIFY_HELP]
    used = sum(len(line) + 1 for line in head + tail) + 80
    shown: list[str] = []
    for row in rows:
        line = _row(row)
        if used + len(line) + 1 > limit:
            break
        shown.append(line)
        used += len(line) + 1
    rest = len(rows) - len(shown)
    more = [f"… and {rest:,} more row(s) in the full table."] if rest else []
    return "\n".join(head + shown + more + tail)


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
