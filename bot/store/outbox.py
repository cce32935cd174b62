"""The outbox: ``outbox/<task id>.json``, one file per task a channel worker must deliver.

Mixed into ``FileStore``. A task stays until ``finish_task`` deletes it, so
"pending" is "present"; the hot index answers the workers' every-tick
questions (``due_tasks``, ``next_task_at``) without reading a file while
nothing changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from sys import intern
from typing import NamedTuple, TypeVar

from .base import TASK_FORMAT, OutboxTask, StoreError, UnknownTaskError, _TASK_ID
from .collection import Collection, Spec
from .documents import DocumentWriter
from .index import Entry

__all__ = ["OutboxFiles", "OUTBOX_SPEC"]

T = TypeVar("T")


class TaskSummary(NamedTuple):
    ended: bool
    channel: str
    order: tuple[datetime, str]
    ready_at: datetime
    review_id: str | None


def task_stem(task_id: str) -> str | None:
    """Task ids are their file names (case kept: ids are chosen by callers and compared exactly)."""
    if not isinstance(task_id, str) or not _TASK_ID.fullmatch(task_id) or ".." in task_id:
        return None
    return task_id


def _summarize(task: OutboxTask) -> TaskSummary:
    return TaskSummary(False, intern(task.channel), (task.created_at, task.id), task.ready_at, task.review_id)


OUTBOX_SPEC: Spec[OutboxTask] = Spec(
    kind="outbox", noun="task", supported=TASK_FORMAT, from_dict=OutboxTask.from_dict, summarize=_summarize,
    name_of=task_stem,
)


_Queue = list[tuple[tuple[datetime, str], datetime, str]]  # (order, ready_at, stem), oldest first


def _by_channel(live: Mapping[str, Entry[TaskSummary]]) -> dict[str, _Queue]:
    channels: dict[str, _Queue] = {}
    for stem, entry in live.items():
        s = entry.summary
        channels.setdefault(s.channel, []).append((s.order, s.ready_at, stem))
    for tasks in channels.values():
        tasks.sort()
    return channels


class OutboxFiles(DocumentWriter):
    """The outbox half of ``FileStore`` (``_outbox`` is its ``Collection``)."""

    _outbox: Collection[OutboxTask]

    def _unknown_task(self, task_id: str) -> UnknownTaskError:
        return UnknownTaskError(f"no pending task {task_id!r} (finished, or never added)")

    def add_task(self, task: OutboxTask) -> bool:
        """Store a new task; False (and no write) if a pending task has this id: adding is idempotent."""
        return self._outbox.add(task)

    def get_task(self, task_id: str) -> OutboxTask:
        found = self._outbox.find(task_id)
        if found is None:
            raise self._unknown_task(task_id)
        return found[1]

    def due_tasks(self, channel: str, now: datetime, limit: int = 50) -> list[OutboxTask]:
        """Pending tasks of ``channel`` ready by ``now`` (not_before passed or unset), oldest first."""
        self._outbox.upkeep()
        tasks = self._outbox.view("by-channel", _by_channel).get(channel, [])
        ready = [stem for _, ready_at, stem in tasks if ready_at <= now]
        return self._outbox.fetch(ready, keep=lambda t: t.channel == channel and t.ready_at <= now, limit=max(limit, 0))

    def next_task_at(self, channel: str) -> datetime | None:
        """When the earliest pending task of ``channel`` becomes ready (None: nothing pending)."""

        def earliest(live: Mapping[str, Entry[TaskSummary]]) -> dict[str, datetime]:
            first: dict[str, datetime] = {}
            for entry in live.values():
                s = entry.summary
                if s.channel not in first or s.ready_at < first[s.channel]:
                    first[s.channel] = s.ready_at
            return first

        return self._outbox.view("earliest", earliest).get(channel)

    def pending_tasks(self, review_id: str | None = None) -> list[OutboxTask]:
        """Every pending task (of one review if given), oldest first."""
        loaded = self._outbox.sync()
        live = self._outbox.live()
        stems = [stem for _, stem in sorted((e.summary.order, s) for s, e in live.items())]
        if review_id is not None:
            stems = [s for s in stems if live[s].summary.review_id == review_id]
        return self._outbox.fetch(stems, keep=lambda t: review_id is None or t.review_id == review_id, loaded=loaded)

    def update_task(self, task_id: str, mutate: Callable[[OutboxTask], T]) -> T:
        """Change a pending task under the lock (e.g. attempts, not_before, last_error after a failure)."""
        return self._outbox.update(task_id, mutate, self._unknown_task)

    def finish_task(self, task_id: str) -> None:
        """Delete a delivered task; finishing one twice is harmless."""
        stem = task_stem(task_id)
        if stem is None:
            raise StoreError(f"invalid task id {task_id!r}")
        self._outbox.delete(stem)

    def _outbox_pending(self) -> int:
        return self._outbox.view("count", len)

