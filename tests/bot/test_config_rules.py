"""bot.config_rules: APScheduler judges every cron line; the rule only translates crontab's numeric weekdays."""

from __future__ import annotations

import re

import pytest

from bot.config_rules import check_cron


@pytest.mark.parametrize(("line", "read_as"), [
    ("0 9 * * 1-5", "0 9 * * mon,tue,wed,thu,fri"),  # crontab's 1-5 is Monday to Friday; APScheduler's 0 is Monday
    ("0 9 * * mon-fri", "0 9 * * mon-fri"),
    ("0 9 last * *", "0 9 last * *"),  # APScheduler's own grammar, beyond crontab's
    ("0 9 * * 0,7", "0 9 * * sun"),  # both Sunday, once
])
def test_a_line_apscheduler_takes_is_kept_with_crontab_weekdays_as_names(line: str, read_as: str) -> None:
    assert check_cron(line) == read_as


@pytest.mark.parametrize("line", ["0 9 32 * *", "0 24 * * *", "0 9 * * 8", "0 9 * *", "0 9 * * mon-sunday"])
def test_a_line_apscheduler_refuses_is_an_error_naming_it(line: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(f"invalid cron expression {line!r}: ")):
        check_cron(line)
