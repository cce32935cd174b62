"""What `status` and `decide` read from the config: ``CoreConfig``'s verdict, remembered per content.

They validate ``bot.config.CoreConfig``: the config but for its channel
blocks, which they neither validate nor need the variables of.
Importing pydantic (about twice a bare interpreter's start-up) and the
config models (twice more) would break their start-up budget
(bench/cli_startup_bench.py), so the verdict on a valid view is remembered
in a file named by a hash of what the model judged (those keys' data, the
models' source and pydantic's version; which keys those are, the models
themselves wrote down): a later run with the same input reads the answer
back instead of importing pydantic. The models are the only judges - the
memo holds their answer, never a rule of its own - and a view with a
``store:`` block (its URL is a secret) is not remembered. An entry holds
no secret; its name is a SHA-256 of data that may hold values from the
environment (a loop's options), never of a channel block's.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config_file import CHANNEL_BLOCKS, channel_stand_in, read_config, resolve_state_dir

if TYPE_CHECKING:  # pragma: no cover
    from .config_blocks import StoreConfig

__all__ = ["ConfigView", "LoopSchedule", "Person", "WebView", "load_view", "memo_dir"]

#: The modules whose source decides the verdict: a change to any of them forgets every remembered one.
_JUDGES = ("config.py", "config_blocks.py", "config_rules.py", "config_file.py", "config_memo.py")


@dataclass(frozen=True)
class Person:
    """A ``people:`` entry as the models validated it: its name and the accounts it votes as."""

    name: str
    account_ids: tuple[str, ...]

    def accounts(self) -> list[str]:
        return list(self.account_ids)


@dataclass(frozen=True)
class LoopSchedule:
    """A loop's ``schedule:`` as the models validated it (both None: it runs only when asked)."""

    name: str
    cron: str | None = None
    interval: float | None = None  #: seconds
    timezone: str | None = None


@dataclass(frozen=True)
class WebView:
    """The ``web:`` keys `status` uses to print each open review's page link (``bot.web.links``).

    Read from the file as it is, like the channel blocks' secrets: `status`
    does not validate the block (``serve`` and ``check`` do); a secret too
    short to be one, or an unset variable, leaves the pages off here.
    """

    secret: str | None = None  #: never print this
    base_url: str = "http://127.0.0.1:8000"  #: ``bot.config_rules.WEB_BASE_URL``
    link_ttl: timedelta = timedelta(days=30)  #: ``bot.config_rules.WEB_LINK_TTL``


def _web_view(data: dict[str, Any]) -> WebView:
    block = data.get("web")
    if not isinstance(block, dict):
        return WebView()
    from .config_rules import WEB_BASE_URL, WEB_LINK_TTL, check_web_secret, duration  # only with pages configured

    secret, base_url, ttl = block.get("secret"), block.get("base_url", WEB_BASE_URL), block.get("link_ttl")
    try:
        secret = check_web_secret(secret) if isinstance(secret, str) else None
    except ValueError:
        secret = None
    try:
        link_ttl = WEB_LINK_TTL if ttl is None else duration(ttl)
    except (ValueError, TypeError):
        link_ttl = WEB_LINK_TTL
    ok = isinstance(base_url, str) and isinstance(link_ttl, timedelta)
    return WebView(secret, base_url, link_ttl) if ok else WebView()


@dataclass(frozen=True)
class ConfigView:
    """The keys of the config that `status` and `decide` use."""

    state_dir: Path  #: absolute
    people: tuple[Person, ...]
    secrets: tuple[str, ...]  #: every secret's plain value, for redaction; never print these
    store: StoreConfig | None = None  #: the PostgreSQL store; None: the directory store in state_dir
    timezone: str = "UTC"  #: the config's default time zone
    #: each loop's (name, cron, interval in seconds, time zone), for `status`'s section of loops
    schedules: tuple[LoopSchedule, ...] = ()
    web: WebView = WebView()  #: the pages: status prints their links when ``web.secret`` is set

    def secret_values(self) -> Iterator[str]:
        return iter(self.secrets)


def memo_dir(environ: Mapping[str, str]) -> Path | None:
    """Where verdicts are remembered: ``$XDG_CACHE_HOME/loopbot/config`` (else ``~/.cache``), None without a home."""
    base = environ.get("XDG_CACHE_HOME") or (str(Path(environ["HOME"]) / ".cache") if environ.get("HOME") else "")
    return Path(base) / "loopbot" / "config" if base else None


def load_view(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> ConfigView:
    """The view of ``path``, or ConfigError naming what is wrong with the keys it reads (as ``load_config`` would)."""
    env = os.environ if environ is None else environ
    read = read_config(path, env, unset=channel_stand_in)
    memo = _Memo.at(memo_dir(env))
    entry = memo.recall(read.data) if memo is not None else None
    store: StoreConfig | None = None
    store_secrets: tuple[str, ...] = ()
    if entry is None:
        from .config import CoreConfig, channel_secret_keys, validate_core

        core = validate_core(read, path, env)
        entry = {
            "state_dir": str(core.state_dir),
            "people": [[person.name, person.accounts()] for person in core.people],
            "secret_keys": channel_secret_keys(),
            "timezone": core.timezone,
            "schedules": [
                [loop.name, loop.schedule.cron if loop.schedule else None,
                 loop.schedule.interval.total_seconds() if loop.schedule and loop.schedule.interval else None,
                 loop.schedule.timezone if loop.schedule else None]
                for loop in core.loops
            ],
        }
        store, store_secrets = core.store, tuple(core.secret_values())
        if memo is not None and store is None:  # a store block's URL is a secret: judged every time
            memo.remember(read.data, [key for key in CoreConfig.model_fields if key not in CHANNEL_BLOCKS], entry)
    return ConfigView(
        state_dir=resolve_state_dir(Path(entry["state_dir"]), path),
        people=tuple(Person(name, tuple(accounts)) for name, accounts in entry["people"]),
        secrets=(*store_secrets, *_channel_secrets(read.data, entry["secret_keys"])),
        store=store,
        timezone=entry["timezone"],
        schedules=tuple(LoopSchedule(*loop) for loop in entry["schedules"]),
        web=_web_view(read.data),
    )


def _channel_secrets(data: dict[str, Any], keys: Mapping[str, list[str]]) -> list[str]:
    """The values the file gives the channel blocks' secret keys, unvalidated: redacting them costs nothing."""
    values = []
    for block, names in keys.items():
        settings = data.get(block)
        if isinstance(settings, dict):
            values += [value for name in names if isinstance(value := settings.get(name), str) and value]
    return values


def _plain(value: Any) -> bool:
    """Whether ``value`` is JSON as it is (so its text names it exactly: no bytes, dates or tags)."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_plain(item) for item in value)
    return value is None or isinstance(value, str | int | float | bool)


class _Memo:
    """The verdicts in ``folder``: ``<judges>.keys`` lists the keys the models judge (``CoreConfig``'s fields
    but the channel blocks, as the models of that source said), ``<hash>.json`` each verdict, named by those
    keys' data."""

    def __init__(self, folder: Path, judges: str) -> None:
        self.folder, self.judges = folder, judges

    @classmethod
    def at(cls, folder: Path | None) -> _Memo | None:
        """The memo in ``folder``; None without one, or when the judges' source cannot be read to name them."""
        if folder is None:
            return None
        digest = hashlib.sha256()
        here = Path(__file__).parent
        spec = importlib.util.find_spec("pydantic")
        pydantic = [Path(where) / "version.py" for where in (spec.submodule_search_locations or [])] if spec else []
        try:
            for file in [*(here / name for name in _JUDGES), *pydantic]:
                digest.update(file.read_bytes())
        except OSError:
            return None
        return cls(folder, digest.hexdigest())

    def _name(self, data: dict[str, Any], keys: list[str]) -> str | None:
        judged = {key: data[key] for key in keys if key in data}
        if not _plain(judged):
            return None
        return hashlib.sha256(f"{self.judges}\n{json.dumps(judged, sort_keys=True)}".encode()).hexdigest()

    def recall(self, data: dict[str, Any]) -> dict[str, Any] | None:
        """The verdict remembered for ``data``, or None (the models must judge)."""
        keys = _read_json(self.folder / f"{self.judges}.keys")
        if not (isinstance(keys, list) and all(isinstance(key, str) for key in keys)):
            return None
        name = self._name(data, keys)
        return None if name is None else _entry(_read_json(self.folder / f"{name}.json"))

    def remember(self, data: dict[str, Any], keys: list[str], entry: dict[str, Any]) -> None:
        name = self._name(data, keys)
        if name is not None:
            _write_json(self.folder, f"{self.judges}.keys", keys)
            _write_json(self.folder, f"{name}.json", entry)


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _entry(entry: Any) -> dict[str, Any] | None:
    """``entry`` when it is a whole verdict as ``load_view`` writes it, else None (the models judge again)."""
    try:
        whole = (
            isinstance(entry["state_dir"], str)
            and all(isinstance(name, str) and isinstance(ids, list) and all(isinstance(a, str) for a in ids)
                    for name, ids in entry["people"])
            and all(isinstance(names, list) and all(isinstance(name, str) for name in names)
                    for names in entry["secret_keys"].values())
            and isinstance(entry["timezone"], str)
            and all(isinstance(loop, list) and len(loop) == 4 and isinstance(loop[0], str)
                    for loop in entry["schedules"])
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return entry if whole else None


def _write_json(folder: Path, name: str, entry: Any) -> None:
    """Write ``entry`` whole (a temporary file renamed over it); a folder that cannot be written is left alone."""
    import tempfile  # only when the models have just judged

    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(entry, handle)
            os.replace(temporary, folder / name)
        except OSError:
            os.unlink(temporary)
            raise
