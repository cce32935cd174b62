"""What no printed or logged text may show: the config's secret values and token-shaped strings, as ``***``.

Apart from the logging setup (``bot.logging.RedactingFilter`` applies it to
every record) because ``loopbot status`` redacts what it prints, and
importing ``logging`` would cost that command's start-up for nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["REDACTED", "Redactor"]

REDACTED = "***"

#: Token shapes that are secret whatever config they came from.
_TOKEN_PATTERNS = (
    re.compile(r"xox[abposr]-[A-Za-z0-9-]{8,}"),  # Slack bot/user/app tokens
    re.compile(r"xapp-[A-Za-z0-9-]{8,}"),  # Slack app-level tokens
    re.compile(r"gh[pousr]_[A-Za-z0-9]{16,}"),  # GitHub tokens
    re.compile(r"github_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
)


class Redactor:
    """Replaces ``secrets`` (those of four characters or more) and token-shaped strings in a text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret containing another is replaced whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _TOKEN_PATTERNS:
            text = pattern.sub(REDACTED, text)
        return text
