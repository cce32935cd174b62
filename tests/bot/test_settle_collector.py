"""settle_collector is tuned for CPython's three-generation collector; a Python that collects otherwise fails here.

Then re-measure (bench/slack_ack_bench.py's p99 and acks/s with and without
it) before keeping the tuning: its threshold means something else there.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from bot import http_server


def test_the_collector_is_the_generational_one_settle_collector_is_tuned_for() -> None:
    probe = "import gc; print(repr((gc.get_threshold(), len(gc.get_count()), gc.get_freeze_count())))"
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    # a young collection every 700 allocations, three generations, nothing frozen yet
    assert ast.literal_eval(fresh) == ((700, 10, 10), 3, 0)
    assert http_server.YOUNG_COLLECTION_EVERY > 700
