"""Log setup for the ``loopbot`` command line, with secrets scrubbed.

Library modules only create loggers; this module - called once by the CLI -
decides where lines go. Every handler gets a ``RedactingFilter`` so a token
that slips into a message (an exception text quoting a request, a config
dump) is printed as ``***`` instead of leaking into a terminal or log store.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable
from typing import TextIO

__all__ = ["RedactingFilter", "setup_logging", "REDACTED"]

REDACTED = "***"

#: Token shapes that are secret whatever config they came from.
_TOKEN_PATTERNS = (
    re.compile(r"xox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack bot/user/app tokens
    re.compile(r"xapp-[A-Za-z0-9-]{8,}"),  # Slack app-level tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{16,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)


class RedactingFilter(logging.Filter):
    """Replace known secret values and token-shaped strings in every record."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first so a secret containing another is replaced whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _TOKEN_PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        cleaned = self.redact(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


def setup_logging(
    *, level: int = logging.INFO, secrets: Iterable[str] = (), stream: TextIO | None = None
) -> RedactingFilter:
    """Send log lines to ``stream`` (stderr) with secrets redacted; idempotent per process."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_loopbot", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler._loopbot = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    redactor = RedactingFilter(secrets)
    handler.addFilter(redactor)
    root.addHandler(handler)
    root.setLevel(level)
    # Third-party chatter that would drown the review lines at INFO.
    for noisy in ("apscheduler", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return redactor
