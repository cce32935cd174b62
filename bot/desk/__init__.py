"""The review desk: where reviews go (targets, outbox) and how answers come back (one vote path).

Names load on first use (PEP 562), as in ``adapters``: `status` reads one
constant of ``bot.desk.outbox`` and `decide` takes the vote path, and
neither should load the whole desk (the posting desk, the local channel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover - what type checkers and editors see
    from .authorize import Authorizer, ListMembership, Membership
    from .channels import LOCAL_REVIEWS_DIR, local_channel
    from .decisions import Decisions
    from .desk import ReviewDesk, outcome_text, review_post
    from .outbox import DeliveryThread, Outbox
    from .people import People
    from .votes import VotePath

#: public name -> the submodule that defines it
_WHERE = {
    **dict.fromkeys(("Authorizer", "ListMembership", "Membership"), "authorize"),
    **dict.fromkeys(("LOCAL_REVIEWS_DIR", "local_channel"), "channels"),
    "Decisions": "decisions",
    **dict.fromkeys(("ReviewDesk", "outcome_text", "review_post"), "desk"),
    **dict.fromkeys(("Outbox", "DeliveryThread"), "outbox"),
    "People": "people",
    "VotePath": "votes",
}

__all__ = [
    "Authorizer",
    "Decisions",
    "ListMembership",
    "LOCAL_REVIEWS_DIR",
    "Membership",
    "Outbox",
    "DeliveryThread",
    "People",
    "ReviewDesk",
    "VotePath",
    "local_channel",
    "outcome_text",
    "review_post",
]


__getattr__ = lazy_getattr(__name__, _WHERE)
