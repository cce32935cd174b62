"""The directory store's delivery files: created once without a lock, a damaged queued one set aside."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bot.store import FileStore
from bot.store.documents import create_once


def test_of_many_writers_racing_for_one_name_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "deliveries" / "pending" / "abc.json"
    start = threading.Barrier(8)
    won: list[bool] = []

    def race(n: int) -> None:
        start.wait()
        won.append(create_once(path, f'{{"writer": {n}}}'.encode()))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 7 + [True]
    assert [p.name for p in path.parent.iterdir()] == ["abc.json"], "no temp file left behind"


def test_racing_deliveries_of_one_key_are_recorded_once(tmp_path: Path) -> None:
    stores = [FileStore(tmp_path) for _ in range(6)]  # as if six processes
    start = threading.Barrier(len(stores))
    won: list[bool] = []

    def deliver(store: FileStore) -> None:
        start.wait()
        won.append(store.record_delivery("hook:d-1", [{"n": 1}]))

    threads = [threading.Thread(target=deliver, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert won.count(True) == 1 and stores[0].pending_deliveries() == [("hook:d-1", [{"n": 1}])]


def test_a_damaged_queued_delivery_is_set_aside_naming_its_file(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    store = FileStore(tmp_path)
    assert store.record_delivery("hook:d-1", [{"n": 1}]) and store.record_delivery("hook:d-2", [{"n": 2}])
    (damaged,) = [p for p in (tmp_path / "deliveries" / "pending").iterdir() if "d-1" in p.read_text()]
    damaged.write_text("{not json")
    assert store.pending_deliveries() == [("hook:d-2", [{"n": 2}])]
    assert str(damaged) in caplog.text and damaged.with_name(damaged.name + ".corrupt").exists()
    assert store.pending_deliveries() == [("hook:d-2", [{"n": 2}])]  # once: not raised on every call
