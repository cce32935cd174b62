"""How does a package load its public names on first use? ``lazy_getattr``, its module ``__getattr__``.

``adapters`` and ``bot.desk`` list their public names at the top but load
each name's submodule only when the name is first asked for (PEP 562), so
that ``status`` and ``decide`` do not load every channel and the posting
desk. The value is then kept in the package, and later lookups do not come
back here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: ``where`` maps each public name to the submodule defining it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)  # later lookups do not come here
        return value

    return __getattr__
