"""What processes cost, from /proc: CPU seconds and context switches, summed over their threads.

For benchmarks that run real ``loopbot`` processes and say where their time goes.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["busy", "context_switches", "cpu_seconds", "machine_seconds"]


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy(pids: list[int]) -> float:
    """CPU seconds of ``pids`` together so far; a process that ended meanwhile counts for nothing."""
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except (OSError, ValueError, IndexError):  # a backend that ended meanwhile
            continue
    return total


def context_switches(pids: list[int]) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of every thread of ``pids`` so far: a thread's wake-ups to
    do a piece of work, and its preemptions by another process wanting the cores."""
    waits = preempted = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                for line in status.read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        waits += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        preempted += int(line.split()[1])
            except OSError:  # a thread that ended meanwhile
                continue
    return waits, preempted


def machine_seconds() -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine so far, every core summed (/proc/stat; idle and iowait are
    not busy, steal is not counted at all)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - fields[3] - fields[4] - fields[7]) / ticks, (sum(fields[:8]) - fields[7]) / ticks
