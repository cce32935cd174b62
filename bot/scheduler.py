"""When does each loop run? APScheduler jobs, one per scheduled loop, that survive restarts.

Jobs live in a SQLite job store inside ``state_dir`` under fixed ids
(``loop:<name>``), so a restart updates each loop's job instead of adding a
copy. A job whose schedule is unchanged keeps its stored next run time: if
that time passed while the bot was down, the run fires once at start
(coalesced) as long as it is within ``misfire_grace_time``; a changed
schedule starts afresh. The stored job calls the module-level ``fire_loop``
(pickled by reference), which finds the live scheduler of this process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from adapters.durations import parse_duration
from .config_rules import crontab_to_apscheduler

__all__ = ["LoopScheduler", "SchedulerError", "fire_loop", "build_trigger", "crontab_to_apscheduler", "JOB_PREFIX"]

logger = logging.getLogger(__name__)

JOB_PREFIX = "loop:"
_JOB_STORE = "default"


class SchedulerError(RuntimeError):
    """The scheduler cannot start as asked (e.g. a second one in the same process)."""


class _Schedule(Protocol):
    cron: str | None
    interval: Any
    timezone: str | None


_live_lock = threading.Lock()
_live_fire: Callable[[str], None] | None = None


def fire_loop(name: str) -> None:
    """The job function stored for every loop: hands the loop to the live scheduler's callback."""
    with _live_lock:
        fire = _live_fire
    if fire is None:
        logger.warning("scheduled run of loop %r fired with no scheduler running in this process; skipped", name)
        return
    fire(name)


def _job_store(url: str, schema: str | None = None) -> Any:
    """APScheduler's SQLAlchemy job store, imported here: SQLAlchemy costs ~0.2 s, which only a
    scheduler that starts needs, not every importer of this module."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    return SQLAlchemyJobStore(url=url, tableschema=schema)


def _interval_seconds(value: Any) -> float:
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value).total_seconds()
    else:
        raise ValueError(f"interval must be a duration like 30m, got {value!r}")
    if seconds <= 0:
        raise ValueError(f"interval must be longer than zero, got {value!r}")
    return seconds


def build_trigger(schedule: _Schedule, default_timezone: str) -> tuple[BaseTrigger, str]:
    """The trigger for a loop's ``schedule`` and a fingerprint that changes exactly when it does."""
    zone_name = schedule.timezone or default_timezone
    zone = ZoneInfo(zone_name)
    cron, interval = schedule.cron, schedule.interval
    if cron and interval:
        raise ValueError("a schedule takes either cron or interval, not both")
    if cron:
        expression = crontab_to_apscheduler(cron)
        return CronTrigger.from_crontab(expression, timezone=zone), f"cron {expression} {zone_name}"
    if interval is not None:
        seconds = _interval_seconds(interval)
        return IntervalTrigger(seconds=seconds, timezone=zone), f"interval {seconds:g}s"
    raise ValueError("a schedule needs cron or interval")


class LoopScheduler:
    """Keeps one job per scheduled loop of ``config`` and calls ``fire(name)`` when one is due.

    ``fire`` runs on APScheduler's worker thread and should hand the run off
    quickly (the runner starts a run thread of its own). Only one LoopScheduler may
    run per process, because the stored jobs find it through a module-level
    slot and one job store must never be shared between schedulers.
    """

    def __init__(self, config: Any, state_dir: str | Path, fire: Callable[[str], None], *,
                 job_store: tuple[str, str] | None = None) -> None:
        """``job_store``: (SQLAlchemy URL, schema) of a shared job store (replicas on PostgreSQL: only the
        leader runs a scheduler); None keeps the jobs in ``state_dir/jobs.sqlite``."""
        self.config = config
        self.state_dir = Path(state_dir)
        self.fire = fire
        self._shared = job_store
        scheduler_config = getattr(config, "scheduler", None)
        self.misfire_grace_time: int | None = getattr(scheduler_config, "misfire_grace_time", 3600)
        self.timezone: str = getattr(config, "timezone", None) or "UTC"
        self.apscheduler: BackgroundScheduler | None = None

    @property
    def job_store_url(self) -> str:
        if self._shared is not None:
            return self._shared[0]
        return f"sqlite:///{self.state_dir.resolve() / 'jobs.sqlite'}"

    @property
    def running(self) -> bool:
        return self.apscheduler is not None

    def start(self) -> None:
        """Open the job store, bring its jobs in line with the config, then start firing."""
        global _live_fire
        with _live_lock:
            if _live_fire is not None:
                raise SchedulerError("a loop scheduler is already running in this process; stop it first")
            _live_fire = self.fire
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            scheduler = BackgroundScheduler(
                jobstores={_JOB_STORE: _job_store(self.job_store_url, self._shared and self._shared[1])},
                job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": self.misfire_grace_time},
                timezone=ZoneInfo(self.timezone),
            )
            scheduler.add_listener(self._on_missed, EVENT_JOB_MISSED)
            scheduler.start(paused=True)
            self.apscheduler = scheduler
            self._sync_jobs(scheduler)
            scheduler.resume()
        except BaseException:
            self.stop()
            raise

    def _sync_jobs(self, scheduler: BackgroundScheduler) -> None:
        wanted: set[str] = set()
        for loop in getattr(self.config, "loops", []):
            schedule = getattr(loop, "schedule", None)
            if schedule is None:
                continue
            job_id = f"{JOB_PREFIX}{loop.name}"
            wanted.add(job_id)
            trigger, fingerprint = build_trigger(schedule, self.timezone)
            name = f"{loop.name} [{fingerprint}]"
            existing = scheduler.get_job(job_id)
            keep: dict[str, Any] = {}
            if existing is not None and existing.name == name:
                keep["next_run_time"] = existing.next_run_time
            scheduler.add_job(
                fire_loop, trigger, args=[loop.name], id=job_id, name=name, replace_existing=True,
                coalesce=True, max_instances=1, misfire_grace_time=self.misfire_grace_time, **keep,
            )
            job = scheduler.get_job(job_id)
            logger.info("loop %s scheduled (%s); next run at %s", loop.name, fingerprint,
                        job.next_run_time.isoformat() if job and job.next_run_time else "never")
        for job in scheduler.get_jobs():
            if job.id.startswith(JOB_PREFIX) and job.id not in wanted:
                scheduler.remove_job(job.id)
                logger.info("removed the schedule of %s: it is no longer scheduled in the config", job.id)

    def _on_missed(self, event: JobExecutionEvent) -> None:
        logger.warning(
            "scheduled run of %s at %s was missed by more than misfire_grace_time (%ss); it runs at its next time",
            event.job_id, event.scheduled_run_time, self.misfire_grace_time,
        )

    def next_run_times(self) -> dict[str, Any]:
        """Loop name -> next run time (None when paused), for status output."""
        if self.apscheduler is None:
            return {}
        return {job.id.removeprefix(JOB_PREFIX): job.next_run_time
                for job in self.apscheduler.get_jobs() if job.id.startswith(JOB_PREFIX)}

    def stop(self, wait: bool = True) -> None:
        """Stop firing; ``wait`` lets a job that is handing off a run finish first. Safe to call twice."""
        global _live_fire
        scheduler, self.apscheduler = self.apscheduler, None
        if scheduler is not None and scheduler.running:
            # APScheduler's thread runs one more round of due jobs after shutdown(), with its executors gone:
            # the submission fails and the next run time is advanced anyway, losing a run missed while down.
            # Without its job store that round finds no job (the store is closed with it).
            scheduler.remove_jobstore(_JOB_STORE)
            scheduler.shutdown(wait=wait)
        with _live_lock:
            if _live_fire is self.fire:
                _live_fire = None
