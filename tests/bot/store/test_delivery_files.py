"""The directory store's delivery records: each key once, and the journal of deliveries accepted with work."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bot.store import FileStore


def test_racing_plain_deliveries_of_one_key_are_recorded_once(tmp_path: Path) -> None:
    stores = [FileStore(tmp_path) for _ in range(8)]  # as if eight processes
    start = threading.Barrier(len(stores))
    won: list[bool] = []

    def deliver(store: FileStore) -> None:
        start.wait()
        won.append(store.record_delivery("slack:event:Ev1"))

    threads = [threading.Thread(target=deliver, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(won) == [False] * 7 + [True]


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


def test_a_line_cut_short_by_a_crash_is_dropped_and_a_damaged_one_skipped_naming_the_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = tmp_path / "deliveries" / "pending.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_bytes(b'{"key": "hook:d-1", "at": "t", "work": [{"n": 1}]}\n'
                        b'{not json}\n'
                        b'{"key": "hook:d-3", "at": "t", "work": [{"n": 3}]}\n'
                        b'{"key": "hook:d-4", "at": "t", "wo')  # the append a kill -9 cut short: never answered
    store = FileStore(tmp_path)
    assert store.pending_deliveries() == [("hook:d-1", [{"n": 1}]), ("hook:d-3", [{"n": 3}])]
    assert f"{journal} line 2: damaged accepted delivery" in caplog.text
    assert store.record_delivery("hook:d-4", [{"n": 4}]), "the cut line was never recorded"
    assert journal.read_bytes().endswith(b'"work":[{"n":4}]}\n') and b'"wo{' not in journal.read_bytes()


def test_finished_deliveries_stay_known_and_the_journal_empties_when_nothing_waits(tmp_path: Path) -> None:
    store = FileStore(tmp_path)
    journal = tmp_path / "deliveries" / "pending.jsonl"
    assert store.record_delivery("hook:d-1", [{"n": 1}]) and store.record_delivery("hook:d-2", [{"n": 2}])
    store.finish_delivery("hook:d-1")
    assert journal.stat().st_size > 0  # d-2 still waits
    store.finish_delivery("hook:d-2")
    assert journal.stat().st_size == 0 and store.pending_deliveries() == []
    assert not store.record_delivery("hook:d-1", [{"n": 1}]) and not store.record_delivery("hook:d-2")


def test_concurrent_deliveries_share_fsyncs_and_all_survive(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import bot.store.journal as journal_module

    syncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(journal_module.os, "fsync", lambda fd: syncs.append(fd) or real_fsync(fd))
    store = FileStore(tmp_path)
    start = threading.Barrier(16)

    def deliver(n: int) -> None:
        start.wait()
        for m in range(10):
            assert store.record_delivery(f"hook:{n}-{m}", [{"n": n, "m": m}])

    threads = [threading.Thread(target=deliver, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reopened = {key for key, _work in FileStore(tmp_path).pending_deliveries()}
    assert reopened == {f"hook:{n}-{m}" for n in range(16) for m in range(10)}
    assert len(syncs) <= 160, "never more than one fsync per delivery"
