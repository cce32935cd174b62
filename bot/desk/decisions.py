"""How does a decided review reach the runner? Through one hub, whoever decided it.

The vote path publishes "review X is decided" the moment a vote decides it;
the tick publishes the decided reviews it finds in the store (decided by
``loopbot decide`` in another process, before this serve started, by a
deadline, or published once already and not applied: a busy run, a failed
attempt). The runner is the one subscriber (``Runner.apply_decided``), so
every decision follows the same path to the engine's resume, and publishing
a review twice is harmless: the runner applies a decision once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["Decisions"]

log = logging.getLogger(__name__)


class Decisions:
    """``publish(review_id)`` calls every subscriber; with none (``loopbot decide``) the store keeps the decision."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[str], object]] = []

    def subscribe(self, subscriber: Callable[[str], object]) -> None:
        self._subscribers.append(subscriber)

    def publish(self, review_id: str) -> None:
        """Hand ``review_id`` to every subscriber; the first failure is raised once all were called.

        The decision is stored before it is published, so a failure loses
        nothing: the tick finds the review still decided and publishes it again.
        """
        failure: Exception | None = None
        for subscriber in self._subscribers:
            try:
                subscriber(review_id)
            except Exception as err:  # noqa: BLE001 - raised below, after the other subscribers had their turn
                failure = failure or err
        if failure is not None:
            raise failure
