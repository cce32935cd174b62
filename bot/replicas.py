"""``serve`` as one of several replicas on a PostgreSQL store: what only the leader does.

Every replica serves HTTP (votes: Slack requests and GitHub webhook deliveries), takes run
requests, delivers outbox tasks and applies decided reviews - each claimed
through the store's leases and run claims, so two replicas never do the same
work. Exactly one replica, the leader (``bot.leader``), also runs

- the scheduler, with APScheduler's SQLAlchemy job store on the same
  database (so a new leader finds the next run times the old one left:
  missed runs fire once, coalesced, within ``misfire_grace_time``),
- the restart of interrupted runs (``Runner.recover`` when it is elected,
  then a sweep every election interval for runs a dead or stopped replica
  left "running"), and
- review deadlines (reminders, escalations, timeout decisions).

A replica that loses leadership stops its scheduler and deadlines at once;
runs it is executing go on (they hold their run claims).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from bot.runner import Runner
from bot.scheduler import LoopScheduler
from bot.store.sql import PostgresStore
from bot.leader import LeaderElection, replicas, scheduler_url

__all__ = ["Leadership", "replicas_view"]

log = logging.getLogger(__name__)


def replicas_view(store: PostgresStore, me: str | None = None) -> dict[str, Any]:
    """Which replica leads and each one's last heartbeat (for /healthz and ``status``)."""
    found = replicas(store)
    leader = next((r.name for r in found if r.leader), None)
    view: dict[str, Any] = {"leader": leader, "replicas": [r.to_dict() for r in found]}
    if me is not None:
        view["replica"] = me
    return view


class Leadership:
    """Competes for leadership of ``store`` and starts or stops the leader's duties as it changes."""

    def __init__(self, config: Any, store: PostgresStore, runner: Runner, fire: Callable[[str], None], *,
                 interval: float = 2.0, info: dict[str, Any] | None = None) -> None:
        self._store = store
        self._runner = runner
        self.interval = interval
        self.scheduler = LoopScheduler(config, config.state_dir, fire,
                                       job_store=(scheduler_url(store.url), store.schema))
        self._lock = threading.Lock()
        self._stopping = False
        self._last_sweep = 0.0
        self.election = LeaderElection(store, interval=interval, on_elected=self._elected,
                                       on_demoted=self._demoted, info=info)

    @property
    def name(self) -> str:
        return self.election.name

    @property
    def leading(self) -> bool:
        return self.election.leading and not self._stopping

    def start(self) -> bool:
        """One round now (so a replica that leads from the start knows it), then compete on a thread."""
        leading = self.election.round()
        self.election.start()
        return leading

    def _elected(self) -> None:
        with self._lock:
            if self._stopping:
                return
            log.info("replica %s leads: starting the scheduler, deadlines and restarts of interrupted runs",
                     self.name)
            self._start_scheduler()
            try:
                self._runner.recover()
            except Exception:  # the sweep tries again every interval
                log.exception("restarting interrupted runs failed; retried by the next sweep")
            self._last_sweep = time.monotonic()

    def _start_scheduler(self) -> None:
        if self.scheduler.running:
            return
        try:
            self.scheduler.start()
        except Exception:  # the database went away between election and start: the sweep retries
            log.exception("the scheduler could not start on %s; retried every %.0f s", self._store.where,
                          self.interval)

    def _demoted(self) -> None:
        with self._lock:
            log.info("replica %s no longer leads: its scheduler and deadlines stop", self.name)
            self.scheduler.stop(wait=False)

    def sweep(self) -> None:
        """The leader's periodic duty (called by every tick, acts once per interval): keep the scheduler
        running and continue runs a dead or stopped replica left "running"."""
        if not self.leading or time.monotonic() - self._last_sweep < self.interval:
            return
        with self._lock:
            if self._stopping or not self.election.leading:
                return
            self._last_sweep = time.monotonic()
            self._start_scheduler()
        self._runner.recover(post=False)

    def stop(self) -> None:
        """Stop the leader's duties and release leadership, so another replica takes over at once."""
        with self._lock:
            self._stopping = True
            self.scheduler.stop(wait=False)
        self.election.stop()
