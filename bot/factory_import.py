"""Where a loop's ``factory: module:callable`` is looked for, and why its import failed, in a person's words.

A newcomer's first factory most often fails at its import: it is not where
Python looks, or it has a typo. ``LoopCatalog`` asks here for the config's
folder to be searched first and for a message that names the folders looked
in, a likely slip of the module's name, or the file and line that broke.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path

from adapters.suggest import did_you_mean

from bot.patterns import PatternError

__all__ = ["search_first", "import_problem"]


def search_first(folder: Path, source: str) -> None:
    """Put ``folder`` at the front of ``sys.path`` if it holds the factory's module (``name.py`` or ``name/``).

    For the rest of the process, not just the import: the factory's module may
    import a sibling later, from an engine built to resume a run. Only when the
    module is there: a config folder without it must not shadow anything else.
    """
    top = source.partition(":")[0].strip().partition(".")[0]
    entry = str(folder)
    if top and ((folder / f"{top}.py").is_file() or (folder / top).is_dir()) and entry not in sys.path:
        sys.path.insert(0, entry)
        importlib.invalidate_caches()  # a module written since the last import must be seen


def import_problem(err: PatternError, source: str, config_dir: Path | None) -> str:
    """``err``'s message, plus where Python looked (module not found) or where the module broke.

    A newcomer's first factory most often fails here: it is not where Python
    looks, or it has a typo. Either way the message should say which folder
    and which line, not leave them to guess.
    """
    cause = err.__cause__
    message = str(err)
    module = source.partition(":")[0].strip()
    if isinstance(cause, ModuleNotFoundError) and cause.name and (
        module == cause.name or module.startswith(cause.name + ".")
    ):
        return f"{message} Looked in {_searched(config_dir)}{_nearby(cause.name, config_dir)}"
    if cause is None or not isinstance(cause, Exception):
        return message
    where = _where(cause)
    return f"{message} ({where})" if where else message


def _searched(config_dir: Path | None) -> str:
    """The import path as a person would check it: the config's folder, PYTHONPATH, this interpreter's packages."""
    places = [f"the config's folder ({config_dir})"] if config_dir is not None else []
    pythonpath = os.environ.get("PYTHONPATH")
    places.append(f"PYTHONPATH ({pythonpath})" if pythonpath else "PYTHONPATH (not set)")
    places.append(f"the packages installed for {sys.executable}")
    return ", then ".join(places) + "."


def _nearby(missing: str, config_dir: Path | None) -> str:
    """A did-you-mean from the modules in the config's folder: `myloop` for `myloops.py` is the usual slip."""
    if config_dir is None or "." in missing:
        return ""
    try:
        names = [p.stem if p.suffix == ".py" else p.name for p in config_dir.iterdir()
                 if p.suffix == ".py" or (p / "__init__.py").is_file()]
    except OSError:
        return ""
    hint = did_you_mean(missing, names)
    return f" In the config's folder{hint.replace(' - did', ': did', 1)}" if hint else ""


def _where(exc: BaseException) -> str | None:
    """"at FILE line N" of the line in the user's module that failed to import (and where it was raised, if deeper)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"at {exc.filename} line {exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    # the frames after importlib's own are the module's code: its top line, then whatever it called
    start = next((i for i, f in enumerate(frames) if f.filename.endswith(os.path.join("importlib", "__init__.py"))), -1)
    code = [f for f in frames[start + 1:] if not f.filename.startswith("<")]
    if not code:
        return None
    first, last = code[0], code[-1]
    where = f"at {first.filename} line {first.lineno}"
    if (last.filename, last.lineno) != (first.filename, first.lineno):
        where += f", raised in {last.filename} line {last.lineno}"
    return where
