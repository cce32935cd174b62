"""bot.config_rules: the cron check asks APScheduler only about lines outside a grammar APScheduler takes whole."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config_rules import _plain_cron, check_cron

EVERYDAY = [
    "0 9 * * mon-fri", "*/15 * * * *", "0 0 1 * *", "30 8 * jan-jun mon", "0,30 9-17/2 * * sat,sun", "5/10 * * * *",
]


@pytest.mark.parametrize("expression", EVERYDAY)
def test_everyday_lines_need_no_apscheduler(expression: str) -> None:
    assert _plain_cron(expression)
    CronTrigger.from_crontab(expression, timezone=ZoneInfo("UTC"))


@pytest.mark.parametrize("expression", ["0 9 last * *", "0 9 * * 1st mon", "0 9 * * MON", "0 9 1,,2 * *", "0 9 * *"])
def test_other_lines_are_left_to_apscheduler(expression: str) -> None:
    assert not _plain_cron(expression)


def test_a_line_outside_the_grammar_is_still_checked_by_apscheduler() -> None:
    assert check_cron("0 9 last * *") == "0 9 last * *"
    with pytest.raises(ValueError, match=r"invalid cron expression '0 9 32 \* \*'"):
        check_cron("0 9 32 * *")


#: (lowest, highest, names) of minute, hour, day, month, day of week as APScheduler reads them
_BOUNDS = [(0, 59, ["x"]), (0, 23, ["x"]), (1, 31, ["x"]), (1, 12, ["jan", "jun", "dec", "mon"]),
           (0, 6, ["mon", "fri", "sun", "jan"])]


def _field(lowest: int, highest: int, names: list[str]) -> st.SearchStrategy[str]:
    """Items around the field's bounds (a step up to past its span, names of this field and another)."""
    number = st.integers(lowest - 1, highest + 1).map(str)
    name = st.sampled_from(names)
    item = st.one_of(
        st.just("*"), number, name, st.tuples(number, number).map("-".join), st.tuples(name, name).map("-".join)
    ).flatmap(lambda item: st.one_of(st.just(item), st.integers(0, highest + 1).map(lambda step: f"{item}/{step}")))
    return st.lists(item, min_size=1, max_size=3).map(",".join)


@settings(max_examples=1000, deadline=None)
@given(data=st.data(), position=st.integers(0, 4))
def test_apscheduler_takes_every_line_of_the_grammar(data: st.DataObject, position: int) -> None:
    """The grammar is a subset: a line it passes never needed APScheduler's verdict (fields are read apart)."""
    fields = ["*"] * 5
    fields[position] = data.draw(_field(*_BOUNDS[position]))
    expression = " ".join(fields)
    if _plain_cron(expression):
        CronTrigger.from_crontab(expression, timezone=ZoneInfo("UTC"))
