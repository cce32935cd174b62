"""What the voter check costs per vote against a 1,200-name reviewer list, next to folding that list once.

Every vote asks ``bot.review_voters.authorize`` (and the desk's
``Authorizer.refusal``, which adds ``people:``) whether its voter is listed,
``bench/replicas_bench.py`` among 1,200 Slack reviewers. The reference line
is what folding that list into a set of case-folded names costs once - the
price of a check that folds the list per vote (about 6% of a replica's GIL
time there, by py-spy). Each case prints its time and its ratio to it:

- a listed Slack id, as Slack sends it (the common vote);
- a listed GitHub login in another case (found after folding half the list);
- a voter nobody lists (refused: the text names who may answer);
- ``Authorizer.refusal`` with 1,200 ``people:`` names, for a voter no person entry names.

The last line says whether the common vote costs at most ``MAX_RATIO`` of one
fold of the list.

Run: ``.venv/bin/python bench/voter_check_bench.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.desk.authorize import Authorizer, ListMembership  # noqa: E402
from bot.desk.people import People  # noqa: E402
from bot.review_records import Reviewers  # noqa: E402
from bot.review_voters import authorize  # noqa: E402

NAMES = 1_200
#: A listed id as its channel sends it costs at most this share of folding the list once.
MAX_RATIO = 0.25


def _per_call(check: Callable[[], Any], rounds: int, number: int = 200) -> float:
    """Median microseconds per call over ``rounds`` timings of ``number`` calls."""
    return statistics.median(timeit.repeat(check, number=number, repeat=rounds)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timings of each case (default 7)")
    args = parser.parse_args(argv)
    slack_ids = [f"U{n:08X}" for n in range(NAMES)]
    logins = [f"Reviewer-{n}" for n in range(NAMES)]
    slack, github = Reviewers(slack_users=slack_ids), Reviewers(github_users=logins)
    authorizer = Authorizer({"slack": ListMembership("slack")}, People([("dana", ["slack:U0DANA"])]))
    with_people = Reviewers(slack_users=slack_ids, people=[f"person{n}" for n in range(NAMES)])
    middle = NAMES // 2
    cases: dict[str, Callable[[], Any]] = {
        "fold the list once (reference)": lambda: {name.casefold() for name in slack_ids},
        "listed Slack id": lambda: authorize(slack, f"slack:{slack_ids[middle]}"),
        "listed GitHub login, other case": lambda: authorize(github, f"github:{logins[middle].lower()}"),
        "refused voter": lambda: authorize(slack, "slack:U0NOBODY"),
        "Authorizer with people:": lambda: authorizer.refusal(with_people, f"slack:{slack_ids[middle]}"),
    }
    times = {name: _per_call(check, args.rounds) for name, check in cases.items()}
    reference = times["fold the list once (reference)"]
    print(f"{'case (1,200 names)':<34} {'us/call':>9} {'x fold':>8}")
    for name, micros in times.items():
        print(f"{name:<34} {micros:9.1f} {micros / reference:8.2f}")
    ratio = times["listed Slack id"] / reference
    verdict = "met" if ratio <= MAX_RATIO else f"MISSED ({ratio:.2f}x)"
    print(f"target: a listed Slack id <= {MAX_RATIO:g}x one fold of the list: {verdict}")
    return 0 if ratio <= MAX_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
