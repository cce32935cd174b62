"""Where does a review go? A loop's targets, from its config to ``adapters.channel.Target``.

The local channel gets every review (it needs no credentials and is the
audit trail); ``post_to`` adds more, each its own message. Two targets with
one key are one target: posting is idempotent per target, not per kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from adapters.channel import Target

__all__ = ["LOCAL", "targets_from", "with_local", "task_slug"]

#: The always-on target.
LOCAL = Target("local")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _as_mapping(raw: Any) -> Mapping[str, Any]:
    """A config ``PostTarget`` (pydantic) or the plain dict a review stored."""
    if isinstance(raw, Mapping):
        return raw
    dumped: Mapping[str, Any] = raw.model_dump(exclude_none=True)
    return dumped


def targets_from(raw_targets: Iterable[Any]) -> list[Target]:
    """Targets in config order, each key once."""
    chosen: dict[str, Target] = {}
    for raw in raw_targets:
        target = Target.from_dict(_as_mapping(raw))
        chosen.setdefault(target.key, target)
    return list(chosen.values())


def with_local(targets: Iterable[Target]) -> list[Target]:
    """``targets`` with the local channel first."""
    return targets_from([LOCAL.to_dict(), *(t.to_dict() for t in targets)])


def task_slug(key: str) -> str:
    """A target key as a part of an outbox task id ("slack:C0123" -> "slack-C0123")."""
    return _UNSAFE.sub("-", key).strip("-") or "x"
