"""What runs when: `loopbot loops`, `status`'s section of loops, the next run across a DST change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.cli import EXIT_OK, main
from bot.config_memo import LoopSchedule
from bot.loops_view import loops_lines, next_times, schedule_words
from bot.scheduler import LoopScheduler
from bot.store import SqliteStore, RunRecord

from .runtime_support import demo, write_config

BERLIN_ZONE = ZoneInfo("Europe/Berlin")
BERLIN = LoopSchedule("tidy", cron="0 9 * * mon-fri", timezone="Europe/Berlin")


@pytest.mark.parametrize(("now", "shown"), [
    # Friday 09:30 CET, the spring change on the Sunday between: Monday 09:00 is CEST, 07:00 UTC
    (datetime(2027, 3, 26, 8, 30, tzinfo=UTC), "next 2027-03-29 09:00 CEST (in 2d22h30m)"),
    # Friday 09:30 CEST, the autumn change on the Sunday between: Monday 09:00 is CET, 08:00 UTC
    (datetime(2026, 10, 23, 7, 30, tzinfo=UTC), "next 2026-10-26 09:00 CET (in 3d30m)"),
])
def test_the_next_run_of_a_berlin_cron_loop_keeps_its_wall_clock_time_across_dst(now: datetime, shown: str) -> None:
    upcoming = next_times([BERLIN], "UTC", now)
    (line,) = loops_lines([BERLIN], "UTC", [], now, upcoming)
    assert line == f"- tidy: at 09:00, Monday to Friday (Europe/Berlin); {shown}; never run yet"


def test_schedules_in_words() -> None:
    assert schedule_words(LoopSchedule("a", cron="mon,tue,wed,thu,fri".join(["0 9 * * ", ""])), "UTC") == (
        "at 09:00, Monday to Friday", "UTC")
    hourly = schedule_words(LoopSchedule("a", cron="15 * * * sat,sun"), "UTC")[0]
    assert hourly == "every hour at :15, Saturday and Sunday"
    assert schedule_words(LoopSchedule("a", cron="*/5 1-3 * * *"), "UTC")[0] == "cron */5 1-3 * * *"
    assert schedule_words(LoopSchedule("a", interval=1800), "UTC") == ("every 30m", None)
    assert schedule_words(LoopSchedule("a"), "UTC") == ("on request only (no schedule)", None)


def test_the_last_run_and_how_long_ago() -> None:
    now = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    runs = [RunRecord(id=f"tidy-run-{n}", loop="tidy", status=status, created_at=now - timedelta(hours=n),
                      updated_at=now - timedelta(hours=n), trigger="schedule")
            for n, status in ((3, "failed"), (2, "completed"))]
    (line,) = loops_lines([BERLIN], "UTC", runs, now, None)
    assert line.endswith("next: not known until `loopbot serve` schedules it; last run tidy-run-2 completed 2h ago")


def _config(tmp_path: Path) -> Path:
    return write_config(tmp_path, [demo(schedule={"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}),
                                   demo("adhoc")])


def test_loopbot_loops_lists_every_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    now = datetime.now(UTC)
    SqliteStore(tmp_path / "state").put_run(RunRecord(id="demo-run-1", loop="demo", status="completed",
                                                    created_at=now, updated_at=now - timedelta(minutes=5),
                                                    trigger="cli"))
    assert main(["--config", str(config), "loops"]) == EXIT_OK
    demo_line, adhoc_line = capsys.readouterr().out.splitlines()
    assert demo_line.startswith("- demo: at 09:00, Monday to Friday (Europe/Berlin); next 20")
    assert demo_line.endswith("; last run demo-run-1 completed 5m ago")
    assert adhoc_line == "- adhoc: on request only (no schedule); never run yet"


def test_status_shows_the_next_times_serve_stored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    assert main(["--config", str(config), "status"]) == EXIT_OK
    assert "- demo: at 09:00, Monday to Friday (Europe/Berlin); next: not known until `loopbot serve` schedules it" \
        in capsys.readouterr().out
    from bot.config import load_config

    scheduler = LoopScheduler(load_config(config, environ={}), tmp_path / "state", lambda name: None)
    scheduler.start()  # as serve does: the job store in state_dir holds each loop's next run
    stored = scheduler.next_run_times()["demo"]
    scheduler.stop()
    assert main(["--config", str(config), "status"]) == EXIT_OK
    shown = stored.astimezone(BERLIN_ZONE).strftime("%Y-%m-%d %H:%M %Z")
    assert f"- demo: at 09:00, Monday to Friday (Europe/Berlin); next {shown} (in " in capsys.readouterr().out
