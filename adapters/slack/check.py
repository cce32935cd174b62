"""Can the bot reach Slack as configured? ``check_connection`` for ``loopbot check``.

``auth.test`` proves the token; its ``x-oauth-scopes`` header lists the
scopes the app was installed with, compared with what loopbot needs
(``REQUIRED_SCOPES``, the same list as slack-manifest.yaml); reading one
message of each review channel proves the bot is in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from adapters.channel import ChannelError

__all__ = ["REQUIRED_SCOPES", "CheckApi", "check_connection"]

#: What loopbot's calls need; keep in step with slack-manifest.yaml.
REQUIRED_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:read",
    "chat:write",
    "commands",
    "files:write",
    "groups:history",
    "groups:read",
    "reactions:write",
    "usergroups:read",
)


class CheckApi(Protocol):
    def identity(self) -> tuple[dict[str, object], frozenset[str] | None]: ...

    def probe_channel(self, channel: str) -> None: ...


def check_connection(client: CheckApi, channels: Iterable[str] = ()) -> str:
    """"bot @loopbot in team Acme (T0123)", or ChannelError saying exactly what is wrong and how to fix it."""
    who, scopes = client.identity()  # ChannelError: invalid_auth etc., with advice
    problems: list[str] = []
    if scopes is not None:
        missing = [scope for scope in REQUIRED_SCOPES if scope not in scopes]
        if missing:
            problems.append(f"the Slack app lacks the scopes {', '.join(missing)}: add them under OAuth & "
                            "Permissions (see slack-manifest.yaml) and reinstall the app")
    for channel in channels:
        try:
            client.probe_channel(channel)
        except ChannelError as exc:
            problems.append(str(exc))
    if problems:
        raise ChannelError("; ".join(problems), permanent=True)
    return f"bot @{who.get('user')} in team {who.get('team')} ({who.get('team_id')})"
