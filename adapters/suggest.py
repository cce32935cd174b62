"""One wording for "did you mean ...?" hints, so every typo a user makes reads the same.

Lives in adapters (not bot) because the command grammar needs it and adapters
may not import bot; bot imports it from here.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["did_you_mean"]


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 1) -> str:
    """' - did you mean "x"?' for the closest of `choices`, or "" when none is close.

    Matching ignores case because people type `Approve` and `TRIAGE-17`.
    """
    options = list(choices)
    if not options:  # nothing to be close to (no review yet): no difflib, a millisecond of start-up
        return ""
    import difflib  # here: most commands never make a typo to hint at, and difflib takes a millisecond to load

    lowered = {choice.lower(): choice for choice in options}
    close = difflib.get_close_matches(word.strip().lower(), list(lowered), n=n, cutoff=0.6)
    if not close:
        return ""
    return " - did you mean " + " or ".join(f'"{lowered[match]}"' for match in close) + "?"
