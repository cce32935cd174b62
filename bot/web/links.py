"""Who may see a page: signed review links for people, one bearer token for operators and Prometheus.

A review message on Slack or GitHub carries ``/reviews/{id}?t=TOKEN``:
``TOKEN`` is ``EXPIRES.SIGNATURE``, an HMAC-SHA256 (keyed by ``web.secret``)
of the review id and the expiry, so it opens that one review until then and
nothing else. The dashboard, the run pages and /metrics take ``web.token``
as ``Authorization: Bearer TOKEN`` or, for a browser, as the password of
HTTP basic auth (any user name). Every comparison takes constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import quote

__all__ = ["ReviewLinks", "bearer_ok"]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


class ReviewLinks:
    """Makes and checks the expiring, per-review links; ``clock`` gives the aware time now."""

    def __init__(self, secret: str, base_url: str, ttl: timedelta, clock: Callable[[], datetime]) -> None:
        self._key = secret.encode("utf-8")
        self.base_url = base_url.rstrip("/")
        self.ttl = ttl
        self._clock = clock

    def _signature(self, review_id: str, expires: int) -> str:
        message = f"review\n{review_id}\n{expires}".encode("utf-8", "surrogatepass")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def token(self, review_id: str) -> str:
        expires = int((self._clock() + self.ttl).timestamp())
        return f"{expires}.{self._signature(review_id, expires)}"

    def url(self, review_id: str) -> str:
        """The page of ``review_id`` with a fresh token, as the messages and ``status`` show it."""
        return f"{self.base_url}/reviews/{quote(review_id, safe='')}?t={self.token(review_id)}"

    def valid(self, review_id: str, token: str | None) -> bool:
        """Is ``token`` this review's, signed by our secret and not expired?"""
        if not token or len(token) > 200:
            return False
        expires_text, _, signature = token.partition(".")
        if not expires_text.isdigit() or len(expires_text) > 12:
            return False
        expires = int(expires_text)
        good = hmac.compare_digest(signature.encode("ascii", "replace"),
                                   self._signature(review_id, expires).encode("ascii"))
        return good and self._clock().timestamp() < expires


def bearer_ok(header: str | None, token: str) -> bool:
    """``Authorization: Bearer TOKEN`` or ``Basic base64(anyone:TOKEN)`` naming ``token``."""
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    given = value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(given, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        given = decoded.partition(":")[2]
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))
