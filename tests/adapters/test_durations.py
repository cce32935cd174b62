"""parse_duration / format_duration as plain tables."""

from __future__ import annotations

from datetime import timedelta

import pytest

from adapters.durations import MAX_DURATION, DurationRangeError, duration_from_seconds, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        (" 2H ", timedelta(hours=2)),
        ("1h 30m", timedelta(hours=1, minutes=30)),
    ],
)
def test_parses_valid_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "invalid duration"),
        ("2", "invalid duration"),
        ("h", "invalid duration"),
        ("2 hours", "invalid duration"),
        ("-1h", "invalid duration"),
        ("1.5h", "invalid duration"),
        ("30m1h", "largest first"),
        ("1m1m", "largest first"),
        ("0s", "longer than zero"),
    ],
)
def test_refuses_invalid_durations_with_help(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


def test_refuses_non_strings() -> None:
    with pytest.raises(ValueError, match="must be a string"):
        parse_duration(30)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=90), "1m30s"),
        (timedelta(hours=24), "1d"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(0), "0s"),
    ],
)
def test_formats_durations(delta: timedelta, text: str) -> None:
    assert format_duration(delta) == text
    if delta:
        assert parse_duration(text) == delta


def test_the_longest_duration_is_366_days() -> None:
    assert timedelta(days=366) == MAX_DURATION
    assert parse_duration("366d") == MAX_DURATION
    assert parse_duration("52w2d") == MAX_DURATION


@pytest.mark.parametrize("text", ["367d", "366d1s", "53w", "3000000d", "99999999999d", "9" * 5000 + "s"])
def test_longer_durations_are_refused_without_overflowing(text: str) -> None:
    with pytest.raises(DurationRangeError) as info:  # not OverflowError, not int()'s digit limit
        parse_duration(text)
    assert "is too long: the longest allowed is 366d" in str(info.value)


@pytest.mark.parametrize(("value", "fragment"), [(0, "longer than zero"), (-5, "longer than zero"),
                                                 (float("nan"), "longer than zero"), (1e20, "too long"),
                                                 (float("inf"), "too long"), (366 * 86400 + 1, "too long")])
def test_seconds_are_bounded_alike(value: float, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        duration_from_seconds(value)
    assert duration_from_seconds(7200) == timedelta(hours=2)
