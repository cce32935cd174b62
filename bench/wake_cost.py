"""What waking costs the work that follows, on this machine: the same work done back to back, and right after a sleep.

A process that sleeps between pieces of work - a replica between votes, a
thread between round trips - comes back to caches that other work has
taken (on a virtual machine, to a core its host may have given away), and
its next piece of work pays for that; one kept busy does not. A replica
carrying a third of the votes sleeps more often per vote than one carrying
them all, so this is part of what a vote costs three replicas
(``replicas_bench`` prints it beside them).

Two pieces of work, each timed in CPU seconds of this process, back to back
and with a sleep of ``pause`` before each (the sleep's own CPU, measured
alone, taken out), the two interleaved over rounds, medians:

- a small one: decoding a 6 kB JSON document eight times;
- the bot's own request path: a signed ``/loopbot approve`` through
  Starlette, ``adapters.slack.route`` and the Bolt app the bot serves, its
  reply handed to a handler over ``VoteBatches`` (the pool thread and back)
  and answered - everything a replica does for a vote but the store, in
  process (ASGI called directly, no sockets).

Run alone: ``.venv/bin/python bench/wake_cost.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.slack_api import FakeSlackApi, signed_headers, slash_command  # noqa: E402

__all__ = ["json_cost", "request_cost"]

SECRET = "wake-secret"


def _hot_and_woken(piece: Callable[[], None], pause: float, pieces: int, rounds: int) -> tuple[float, float]:
    """(CPU µs of ``piece`` back to back, the same right after a sleep of ``pause``), medians over ``rounds``."""
    def per_piece(work: bool, sleep: float) -> float:
        started = time.process_time()
        for _ in range(pieces):
            if work:
                piece()
            if sleep:
                time.sleep(sleep)
        return (time.process_time() - started) * 1e6 / pieces

    per_piece(True, 0.0)  # warm: first calls, caches of this process's own
    hot, woken = [], []
    for _ in range(rounds):
        hot.append(per_piece(True, 0.0))
        woken.append(per_piece(True, pause) - per_piece(False, pause))
    return statistics.median(hot), statistics.median(woken)


def json_cost(pause: float = 0.0002, pieces: int = 1500, rounds: int = 5) -> tuple[float, float]:
    document = json.dumps({"reviewers": [f"slack:U{n:05d}" for n in range(300)]})

    def piece() -> None:
        for _ in range(8):
            json.loads(document)

    return _hot_and_woken(piece, pause, pieces, rounds)


def request_cost(api_base_url: str, pause: float = 0.0002, pieces: int = 400,
                 rounds: int = 5) -> tuple[float, float]:
    """The request path's; ``api_base_url``: a fake Slack Web API (Bolt asks it ``auth.test`` once)."""
    from starlette.applications import Starlette

    from adapters.channel import Answer, AnswerKind, Reply
    from adapters.slack.listeners import build_app
    from adapters.slack.route import slack_route
    from adapters.vote_batches import one_by_one

    def answer(reply: Reply) -> Answer:
        return Answer(AnswerKind.COUNTED, "recorded: 1 of 2 approvals", reply.review_id)

    bolt = build_app(signing_secret=SECRET, handler=one_by_one(answer), bot_token="xoxb-wake",
                     api_base_url=api_base_url)
    app = Starlette(routes=[slack_route(bolt, signing_secret=SECRET)])
    loop = asyncio.new_event_loop()
    numbers = iter(range(10**9))

    def piece() -> None:
        loop.run_until_complete(_post(app, next(numbers)))

    try:
        return _hot_and_woken(piece, pause, pieces, rounds)
    finally:
        loop.close()


async def _post(app: Callable[..., Awaitable[None]], number: int) -> None:
    """One signed slash-command vote through ``app`` (ASGI, in process); refused: the bench stops."""
    body = slash_command(f"U{number:07d}", "approve demo-1", trigger_id=f"{number}.wake").encode()
    headers = [(name.encode(), value.encode()) for name, value in signed_headers(SECRET, body).items()]
    scope: dict[str, Any] = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                             "scheme": "http", "path": "/slack/events", "raw_path": b"/slack/events",
                             "query_string": b"", "headers": [(b"content-length", str(len(body)).encode()), *headers],
                             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    status = sent[0].get("status")
    text = b"".join(m.get("body", b"") for m in sent[1:])
    if status != 200 or b"recorded" not in text:
        raise SystemExit(f"the request path answered {status}: {text[:200]!r}")


def lines(api_base_url: str) -> list[str]:
    """Both pieces measured, a line each."""
    measured = (("decoding a 6 kB JSON document 8 times", json_cost()),
                ("the bot's request path for a Slack vote", request_cost(api_base_url)))
    return [f"{label}: {hot:.0f} µs of CPU back to back, {woken:.0f} µs ({woken / hot:.2f}x) right after a sleep of "
            f"200 µs" for label, (hot, woken) in measured]


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    with FakeSlackApi() as fake:
        print("\n".join(lines(fake.base_url)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
