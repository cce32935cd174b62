"""``loopbot init``: write the commented example config, never over an existing file.

The text is config.example.yaml, shipped inside the package (bot/config.example.yaml
links to the repository's copy, and ``[tool.setuptools.package-data]`` puts it in
the wheel), so an installed loopbot - without the repository - can still
write a config that documents every key.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["InitError", "example_config_text", "write_example_config"]

EXAMPLE = "config.example.yaml"


class InitError(Exception):
    """The config cannot be written; the message says why and what to do instead."""


def example_config_text() -> str:
    """The commented example config as shipped with this version of loopbot."""
    return resources.files("bot").joinpath(EXAMPLE).read_text(encoding="utf-8")


def write_example_config(path: str | os.PathLike[str]) -> Path:
    """Write the example to ``path`` and return it; InitError if it exists or cannot be written.

    Created with O_EXCL: a config someone has edited is never replaced, not
    even by a second ``init`` racing this one.
    """
    target = Path(path)
    text = example_config_text()
    try:
        with open(target, "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise InitError(
            f"{target} already exists; not overwriting it. Edit it, or write the example elsewhere: "
            f"loopbot init other.yaml"
        ) from None
    except IsADirectoryError:
        example = target / "config.yaml"
        raise InitError(f"{target} is a directory; give a file name, e.g. loopbot init {example}") from None
    except FileNotFoundError:
        raise InitError(f"cannot write {target}: the folder {target.parent} does not exist") from None
    except OSError as err:
        raise InitError(f"cannot write {target}: {err.strerror}") from None
    return target
