"""The loop scheduler: stable job ids, triggers, stale jobs, missed runs, day-of-week names."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot import scheduler as scheduler_module
from bot.scheduler import LoopScheduler, SchedulerError, build_trigger, crontab_to_apscheduler, fire_loop


@dataclass
class Schedule:
    cron: str | None = None
    interval: object = None
    timezone: str | None = None


@dataclass
class Loop:
    name: str
    schedule: Schedule | None = None


@dataclass
class SchedulerSettings:
    misfire_grace_time: int | None = 3600


@dataclass
class Config:
    loops: list[Loop] = field(default_factory=list)
    timezone: str = "UTC"
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)


class Recorder:
    """A fire callback that records loop names and wakes waiters."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fired = threading.Event()

    def __call__(self, name: str) -> None:
        self.calls.append(name)
        self.fired.set()


@pytest.fixture
def started(tmp_path: Path):
    """Start LoopSchedulers and always stop them, so no test leaks the process-wide slot."""
    schedulers: list[LoopScheduler] = []

    def start(config: Config, fire: Recorder | None = None) -> LoopScheduler:
        loop_scheduler = LoopScheduler(config, tmp_path, fire or Recorder())
        schedulers.append(loop_scheduler)
        loop_scheduler.start()
        return loop_scheduler

    yield start
    for loop_scheduler in schedulers:
        loop_scheduler.stop()


def job_store(state_dir: Path) -> SQLAlchemyJobStore:
    """The job store read and written directly, with no scheduler that could process its jobs."""
    store = SQLAlchemyJobStore(url=f"sqlite:///{state_dir / 'jobs.sqlite'}")
    store.start(None, "default")
    return store


def stored_jobs(state_dir: Path) -> dict[str, datetime | None]:
    """Job id -> next run time as the job store holds them."""
    store = job_store(state_dir)
    try:
        return {job.id: job.next_run_time for job in store.get_all_jobs()}
    finally:
        store.shutdown()


def set_next_run_time(state_dir: Path, job_id: str, when: datetime) -> None:
    """Pretend the bot was down when this job was due."""
    store = job_store(state_dir)
    try:
        job = store.lookup_job(job_id)
        job.next_run_time = when
        store.update_job(job)
    finally:
        store.shutdown()


CONFIG = Config(loops=[
    Loop("triage", Schedule(cron="0 9 * * mon-fri", timezone="Europe/Berlin")),
    Loop("sweep", Schedule(interval="30m")),
    Loop("manual"),
])


def test_one_job_per_scheduled_loop_with_stable_ids_across_restarts(started, tmp_path: Path) -> None:
    first = started(CONFIG)
    assert set(first.next_run_times()) == {"triage", "sweep"}
    first.stop()
    second = started(CONFIG)
    second.stop()
    third = started(CONFIG)
    assert sorted(job.id for job in third.apscheduler.get_jobs()) == ["loop:sweep", "loop:triage"]
    third.stop()
    assert sorted(stored_jobs(tmp_path)) == ["loop:sweep", "loop:triage"]
    assert (tmp_path / "jobs.sqlite").is_file()


def test_jobs_have_the_configured_triggers_and_defaults(started) -> None:
    settings = SchedulerSettings(misfire_grace_time=120)
    config = Config(loops=CONFIG.loops, timezone="America/New_York", scheduler=settings)
    loop_scheduler = started(config)
    triage = loop_scheduler.apscheduler.get_job("loop:triage")
    sweep = loop_scheduler.apscheduler.get_job("loop:sweep")
    assert isinstance(triage.trigger, CronTrigger)
    assert triage.trigger.timezone == ZoneInfo("Europe/Berlin")
    assert triage.next_run_time.tzinfo is not None
    assert triage.next_run_time.astimezone(ZoneInfo("Europe/Berlin")).hour == 9
    assert isinstance(sweep.trigger, IntervalTrigger)
    assert sweep.trigger.interval == timedelta(minutes=30)
    assert sweep.trigger.timezone == ZoneInfo("America/New_York")  # the config's default timezone
    for job in (triage, sweep):
        assert (job.coalesce, job.max_instances, job.misfire_grace_time) == (True, 1, 120)
        assert job.args == ("triage",) if job is triage else ("sweep",)
        assert job.func is fire_loop


def test_jobs_of_loops_removed_or_unscheduled_are_removed(started, tmp_path: Path) -> None:
    started(Config(loops=[Loop("a", Schedule(interval=60)), Loop("b", Schedule(interval=60)),
                          Loop("c", Schedule(interval=60))])).stop()
    started(Config(loops=[Loop("a", Schedule(interval=60)), Loop("c")])).stop()
    assert sorted(stored_jobs(tmp_path)) == ["loop:a"]


def test_a_run_missed_while_down_fires_once_at_start(started, tmp_path: Path) -> None:
    config = Config(loops=[Loop("sweep", Schedule(interval="1h"))])
    started(config).stop()
    set_next_run_time(tmp_path, "loop:sweep", datetime.now(UTC) - timedelta(minutes=5))
    recorder = Recorder()
    loop_scheduler = started(config, recorder)
    assert recorder.fired.wait(timeout=10), "the missed run did not fire at start"
    loop_scheduler.stop(wait=True)
    assert recorder.calls == ["sweep"]
    assert stored_jobs(tmp_path)["loop:sweep"] > datetime.now(UTC) + timedelta(minutes=50)


def test_several_missed_runs_are_coalesced_into_one(started, tmp_path: Path) -> None:
    config = Config(loops=[Loop("tick", Schedule(interval="1m"))])
    started(config).stop()
    set_next_run_time(tmp_path, "loop:tick", datetime.now(UTC) - timedelta(minutes=30))
    recorder = Recorder()
    loop_scheduler = started(config, recorder)
    assert recorder.fired.wait(timeout=10)
    loop_scheduler.stop(wait=True)
    assert recorder.calls == ["tick"]


class EventHandler(logging.Handler):
    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.seen = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if self.needle in message:
            self.messages.append(message)
            self.seen.set()


def test_a_run_missed_beyond_the_grace_time_is_skipped_with_a_warning(started, tmp_path: Path) -> None:
    config = Config(loops=[Loop("sweep", Schedule(interval="1d"))], scheduler=SchedulerSettings(misfire_grace_time=60))
    started(config).stop()
    set_next_run_time(tmp_path, "loop:sweep", datetime.now(UTC) - timedelta(hours=2))
    handler = EventHandler("was missed by more than misfire_grace_time")
    logging.getLogger("bot.scheduler").addHandler(handler)
    try:
        recorder = Recorder()
        loop_scheduler = started(config, recorder)
        assert handler.seen.wait(timeout=10)
        loop_scheduler.stop(wait=True)
    finally:
        logging.getLogger("bot.scheduler").removeHandler(handler)
    assert recorder.calls == []
    assert "loop:sweep" in handler.messages[0]


def test_stopping_or_failing_to_start_never_consumes_a_missed_run(tmp_path: Path) -> None:
    """APScheduler's shutdown trap: its thread may process due jobs once more after shutdown."""
    config = Config(loops=[Loop("sweep", Schedule(interval="1h"))])
    first = LoopScheduler(config, tmp_path, Recorder())
    first.start()
    first.stop()
    missed = datetime.now(UTC) - timedelta(minutes=5)
    set_next_run_time(tmp_path, "loop:sweep", missed)
    recorder = Recorder()
    broken = LoopScheduler(Config(loops=[*config.loops, Loop("bad", Schedule(interval="soon"))]), tmp_path, recorder)
    with pytest.raises(ValueError, match="invalid duration"):
        broken.start()
    assert recorder.calls == []
    assert stored_jobs(tmp_path)["loop:sweep"] == missed


def test_a_changed_schedule_starts_afresh(started, tmp_path: Path) -> None:
    started(Config(loops=[Loop("sweep", Schedule(interval="1h"))])).stop()
    set_next_run_time(tmp_path, "loop:sweep", datetime.now(UTC) - timedelta(minutes=5))
    recorder = Recorder()
    loop_scheduler = started(Config(loops=[Loop("sweep", Schedule(interval="2h"))]), recorder)
    job = loop_scheduler.apscheduler.get_job("loop:sweep")
    assert job.next_run_time > datetime.now(UTC) + timedelta(minutes=110)
    loop_scheduler.stop(wait=True)
    assert recorder.calls == []


def test_only_one_scheduler_per_process(started, tmp_path: Path) -> None:
    started(CONFIG)
    other = LoopScheduler(CONFIG, tmp_path / "other", Recorder())
    with pytest.raises(SchedulerError, match="already running in this process"):
        other.start()


def test_fire_loop_calls_the_live_scheduler(started) -> None:
    recorder = Recorder()
    loop_scheduler = started(Config(), recorder)
    fire_loop("demo")
    assert recorder.calls == ["demo"]
    loop_scheduler.stop()
    fire_loop("demo")  # after stop: logged and skipped
    assert recorder.calls == ["demo"]
    assert scheduler_module._live_fire is None


def test_a_bad_schedule_fails_start_and_frees_the_slot(tmp_path: Path) -> None:
    bad = LoopScheduler(Config(loops=[Loop("x", Schedule(interval="soon"))]), tmp_path, Recorder())
    with pytest.raises(ValueError, match="invalid duration"):
        bad.start()
    assert scheduler_module._live_fire is None


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 9 * * 1-5", "0 9 * * mon,tue,wed,thu,fri"),
        ("0 9 * * 0", "0 9 * * sun"),
        ("0 9 * * 7", "0 9 * * sun"),
        ("0 9 * * 0,6", "0 9 * * sun,sat"),
        ("0 9 * * 5-7", "0 9 * * fri,sat,sun"),
        ("0 9 * * */2", "0 9 * * sun,tue,thu,sat"),
        ("0 9 * * 1-5/2", "0 9 * * mon,wed,fri"),
        ("0 9 * * 1,wed", "0 9 * * mon,wed"),
        ("0 9 * * mon-fri", "0 9 * * mon-fri"),
        ("*/5 * * * *", "*/5 * * * *"),
    ],
)
def test_numeric_days_of_week_become_names(expression: str, expected: str) -> None:
    assert crontab_to_apscheduler(expression) == expected


@pytest.mark.parametrize(("expression", "message"), [("0 9 * * 8", "out of range"), ("0 9 * *", "5 fields"),
                                                      ("0 9 * * 5-2", "out of range")])
def test_bad_crontab_is_refused(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crontab_to_apscheduler(expression)


@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        # Saturday 2026-01-03 10:00 Berlin -> Monday 09:00 Berlin (crontab 1 = Monday, not Tuesday)
        ("0 9 * * 1-5", "Europe/Berlin", datetime(2026, 1, 3, 10, 0), datetime(2026, 1, 5, 9, 0)),
        # crontab 0 = Sunday
        ("30 7 * * 0", "UTC", datetime(2026, 1, 3, 10, 0), datetime(2026, 1, 4, 7, 30)),
        # wall-clock time across the DST change in New York (2026-03-08)
        ("0 9 * * *", "America/New_York", datetime(2026, 3, 7, 10, 0), datetime(2026, 3, 8, 9, 0)),
    ],
)
def test_cron_triggers_fire_at_local_wall_clock_times(
    cron: str, zone: str, after: datetime, expected: datetime
) -> None:
    trigger, fingerprint = build_trigger(Schedule(cron=cron, timezone=zone), "UTC")
    tz = ZoneInfo(zone)
    assert trigger.get_next_fire_time(None, after.replace(tzinfo=tz)) == expected.replace(tzinfo=tz)
    assert fingerprint.endswith(zone)


@pytest.mark.parametrize("interval", ["90s", 90, 90.0, timedelta(seconds=90)])
def test_interval_forms(interval: object) -> None:
    trigger, fingerprint = build_trigger(Schedule(interval=interval), "UTC")
    assert trigger.interval == timedelta(seconds=90)
    assert fingerprint == "interval 90s"


@pytest.mark.parametrize(
    ("schedule", "message"),
    [(Schedule(), "needs cron or interval"), (Schedule(cron="* * * * *", interval=5), "not both"),
     (Schedule(interval=0), "longer than zero"), (Schedule(interval=[1]), "must be a duration")],
)
def test_bad_schedules(schedule: Schedule, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_trigger(schedule, "UTC")


def test_works_with_the_real_config(started, tmp_path: Path) -> None:
    from bot.config import load_config

    path = tmp_path / "config.yaml"
    path.write_text(
        "timezone: Europe/Berlin\n"
        "scheduler: {misfire_grace_time: 600}\n"
        "loops:\n"
        "  - {name: weekdays, pattern: demo, schedule: {cron: '0 9 * * 1-5', timezone: America/New_York}}\n"
        "  - {name: often, pattern: demo, schedule: {interval: 90s}}\n"
        "  - {name: manual, pattern: demo}\n",
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    loop_scheduler = started(config)
    weekdays = loop_scheduler.apscheduler.get_job("loop:weekdays")
    often = loop_scheduler.apscheduler.get_job("loop:often")
    assert loop_scheduler.apscheduler.get_job("loop:manual") is None
    assert weekdays.trigger.timezone == ZoneInfo("America/New_York")
    assert weekdays.next_run_time.astimezone(ZoneInfo("America/New_York")).weekday() < 5  # Monday-Friday
    assert often.trigger.interval == timedelta(seconds=90)
    assert often.trigger.timezone == ZoneInfo("Europe/Berlin")
    assert often.misfire_grace_time == 600
