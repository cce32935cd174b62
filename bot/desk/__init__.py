"""The review desk: where reviews go (targets, outbox) and how answers come back (one vote path)."""

from __future__ import annotations

from .authorize import Authorizer, ListMembership, Membership
from .channels import LOCAL_REVIEWS_DIR, local_channel
from .desk import ReviewDesk, outcome_text, review_post
from .outbox import Outbox, OutboxWorker
from .people import People
from .votes import VotePath

__all__ = [
    "Authorizer",
    "ListMembership",
    "LOCAL_REVIEWS_DIR",
    "Membership",
    "Outbox",
    "OutboxWorker",
    "People",
    "ReviewDesk",
    "VotePath",
    "local_channel",
    "outcome_text",
    "review_post",
]
