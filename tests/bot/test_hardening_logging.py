"""The same log line repeated is printed once per interval, with a count of what was held back (issue #12)."""

from __future__ import annotations

import io
import logging


from bot.logging import RepeatFilter, setup_logging
from bot.redaction import REDACTED


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(stream: io.StringIO) -> list[str]:
    return [line.split(" ", 2)[2] for line in stream.getvalue().splitlines() if line.strip()]


def test_setup_logging_prints_a_repeated_line_once_per_interval_with_the_count(stream: io.StringIO) -> None:
    clock = Clock()
    setup_logging(stream=stream, secrets=["hunter2-signing"], repeat_interval=60, clock=clock)
    log = logging.getLogger("loopbot.test")
    for _ in range(500):  # a tick failing every 0.1 s
        log.warning("tick failed: store unusable (%s)", "hunter2-signing")
        clock.now += 0.1
    log.info("something else")
    clock.now += 60
    log.warning("tick failed: store unusable (%s)", "hunter2-signing")
    assert lines(stream) == [
        f"WARNING loopbot.test: tick failed: store unusable ({REDACTED})",
        "INFO loopbot.test: something else",
        f"WARNING loopbot.test: tick failed: store unusable ({REDACTED}) (and 499 more time(s) in the 60 s before)",
    ]


def test_logger_and_level_are_part_of_what_repeats(stream: io.StringIO) -> None:
    setup_logging(stream=stream, clock=Clock())
    logging.getLogger("a").warning("same")
    logging.getLogger("b").warning("same")
    logging.getLogger("a").error("same")
    logging.getLogger("a").warning("same")
    assert lines(stream) == ["WARNING a: same", "WARNING b: same", "ERROR a: same"]


def test_a_zero_interval_turns_it_off(stream: io.StringIO) -> None:
    setup_logging(stream=stream, repeat_interval=0)
    for _ in range(3):
        logging.getLogger("a").warning("same")
    assert len(lines(stream)) == 3


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("bot", logging.INFO, __file__, 1, message, None, None)


def test_memory_is_bounded_by_max_keys() -> None:
    clock = Clock()
    repeats = RepeatFilter(60, clock=clock, max_keys=10)
    for i in range(1000):
        assert repeats.filter(record(f"run demo-run-{i} started"))
    assert len(repeats._seen) <= 10
    assert not repeats.filter(record("run demo-run-999 started"))  # the newest are the ones kept


def test_over_max_keys_the_line_printed_longest_ago_is_forgotten_first() -> None:
    clock = Clock()
    repeats = RepeatFilter(60, clock=clock, max_keys=3)
    assert repeats.filter(record("a"))
    clock.now += 30
    assert repeats.filter(record("b")) and repeats.filter(record("c"))
    clock.now += 40  # a was printed 70 s ago, b and c 40 s ago
    assert repeats.filter(record("d"))  # a fourth line: a goes
    assert not repeats.filter(record("b")) and not repeats.filter(record("c")), "still held back"
    assert repeats.filter(record("a")), "forgotten, so printed again"


def test_lines_sharing_a_repeat_key_are_counted_as_one(stream: io.StringIO) -> None:
    clock = Clock()
    setup_logging(stream=stream, repeat_interval=60, clock=clock)
    log = logging.getLogger("loopbot.test")
    for age in (600, 601, 9999):
        log.warning("timestamp %d s old", age, extra={"repeat_key": "clock"})
        clock.now += 1
    log.warning("other")
    clock.now += 60
    log.warning("timestamp %d s old", 42, extra={"repeat_key": "clock"})
    assert lines(stream) == [
        "WARNING loopbot.test: timestamp 600 s old",
        "WARNING loopbot.test: other",
        "WARNING loopbot.test: timestamp 42 s old (and 2 more time(s) in the 60 s before)",
    ]
