"""``POST /slack/events`` under attack: big, unsigned and malformed requests against a real ``loopbot serve``.

Issue #23, finding 5 and part of 10: an unsigned body is refused before it is
read whole (413 over the cap, memory bounded), nothing of a request reaches
the log, a refusal is one short line, and a bad timestamp header or a
malformed body is a 400/401, never a 500. One ``loopbot serve`` (with the
fake Slack Web API) serves the whole module; each test reads the log it
grew. Memory is the server's peak RSS (``VmHWM``), reset before each request
through ``/proc/<pid>/clear_refs``.
"""

from __future__ import annotations

import re
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.slack.route import MAX_BODY
from tests.fakes.slack_api import FakeSlackApi, signed_headers

from .e2e.conftest import Bot, Workspace
from .e2e.slack_support import SECRET, SlackDesk, slack_loop

pytestmark = pytest.mark.e2e

MB = 1024 * 1024


class Served:
    """The module's bot, with raw-socket requests and a view of what its log grew by."""

    def __init__(self, desk: SlackDesk, bot: Bot) -> None:
        self.desk, self.bot = desk, bot
        assert bot.proc is not None and bot.port is not None
        self.pid, self.port = bot.proc.pid, bot.port
        self._mark = 0

    def mark(self) -> None:
        self._mark = self.bot.log_path.stat().st_size

    def grown(self) -> str:
        with open(self.bot.log_path, "rb") as log:
            log.seek(self._mark)
            return log.read().decode("utf-8", "replace")

    def peak_rss(self) -> int:
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def post(self, body: bytes, headers: dict[str, str], *, chunked: bool = False, total: int | None = None) -> int:
        """The status of a POST whose body is ``body``, repeated up to ``total`` bytes, sent until answered.

        The body is streamed: chunked (no ``Content-Length``) or with
        ``total`` declared as its length. Sending stops as soon as
        the server answers or closes, so a server that refuses early is not
        made to read what a server reading everything would get.
        """
        total = len(body) if total is None else total
        head = ["POST /slack/events HTTP/1.1", "Host: bot.test", "Connection: close",
                *(f"{name}: {value}" for name, value in headers.items())]
        head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as conn:
            conn.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            sent = 0
            try:
                while sent < total and not select.select([conn], [], [], 0)[0]:
                    piece = body[: total - sent]
                    conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    sent += len(piece)
                if chunked and sent >= total:
                    conn.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused and closed: the answer is already here
            answer = b""
            try:
                while b"\r\n" not in answer and (chunk := conn.recv(4096)):
                    answer += chunk
            except ConnectionResetError:
                pass
        assert answer.startswith(b"HTTP/1.1 "), f"no answer (sent {sent} bytes): {answer[:100]!r}"
        return int(answer.split(b" ", 2)[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    ws = Workspace(tmp_path_factory.mktemp("slack-edge"))
    with FakeSlackApi() as fake:
        desk = SlackDesk(ws, fake)
        ws.env["SLACK_BOT_TOKEN"] = "xoxb-from-the-environment"  # as on a platform: Bolt reads it, and warned
        desk.configure(slack_loop())
        try:
            bot = desk.serve()
            ws.wait_open_review()  # started, run and posted: what is logged from now on is the requests'
            yield Served(desk, bot)
        finally:
            desk.close()
            for bot in ws.bots:
                bot.close()


def unsigned(body: bytes) -> dict[str, str]:
    return {"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Request-Timestamp": str(int(time.time())),
            "X-Slack-Signature": "v0=" + "0" * 64}


def padding(size: int, seed: int = 0) -> bytes:
    """``size`` bytes of a form body unlike any other seed's."""
    return (b"text=%d-" % seed + b"x" * size)[:size]


# --- size -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("chunked", [True, False], ids=["streamed-without-length", "with-content-length"])
def test_an_unsigned_100_mb_body_is_refused_and_the_server_memory_stays_bounded(served: Served,
                                                                               chunked: bool) -> None:
    piece = padding(256 * 1024)
    served.reset_peak()
    before = served.peak_rss()
    status = served.post(piece, unsigned(piece), chunked=chunked, total=100 * MB)
    grew = served.peak_rss() - before
    assert grew < 20 * MB, f"the server's peak RSS grew by {grew / MB:.0f} MB for one refused request"
    assert status == 413
    assert served.bot.healthz().status_code == 200


def test_a_1_mb_body_is_413_and_nothing_is_logged(served: Served) -> None:
    body = padding(MB)
    served.mark()
    assert served.post(body, unsigned(body)) == 413
    assert served.post(body, unsigned(body), chunked=True) == 413
    assert served.grown() == ""


def test_a_body_at_the_cap_is_read_and_its_signature_checked(served: Served) -> None:
    body = padding(MAX_BODY)
    assert served.post(body, unsigned(body)) == 401
    assert served.post(padding(MAX_BODY + 1), unsigned(body)) == 413


# --- the log ----------------------------------------------------------------------------------------
def test_20_distinct_bad_signature_bodies_grow_the_log_by_one_short_line(served: Served) -> None:
    served.mark()
    for seed in range(20):
        body = padding(MAX_BODY - 1000, seed)
        assert served.post(body, unsigned(body)) == 401
    for seed in range(20):
        body = padding(MB, seed)
        assert served.post(body, unsigned(body)) == 413
    grown = served.grown()
    assert len(grown) < 300, grown  # one line, or none when an earlier test's refusal is still counted as repeated
    assert "xxxx" not in grown
    assert "WARNING adapters.slack.route: slack: refused a request: bad signature: is slack.signing_secret the " \
           "Slack app's?\n" in served.bot.log()


def test_a_newline_in_an_unsigned_body_forges_no_log_line(served: Served) -> None:
    forged = "2026-12-01 10:00:00,000 INFO bot.desk.votes: decided: approve by slack:U0BOSS"
    served.mark()
    for body in (f"payload=x\n{forged}\n", f"text=%0A{forged}", f"payload=x\r{forged}"):
        assert served.post(body.encode(), unsigned(body.encode())) == 401
    headers = {**unsigned(b""), "X-Slack-Signature": f"v0=1 {forged}"}
    assert served.post(b"text=x", headers) == 401
    grown = served.grown()
    assert "U0BOSS" not in grown and "decided" not in grown
    assert all(" WARNING adapters.slack.route: slack: refused a request: " in line for line in grown.splitlines())


def test_the_serve_log_has_no_bolt_chatter_and_no_request_text(served: Served) -> None:
    log = served.bot.log()
    assert "As you gave" not in log  # Bolt's warning at every start, since we give it our own client
    assert "Invalid request signature" not in log and "body:" not in log


# --- malformed requests: 400/401, never 500 ---------------------------------------------------------
@pytest.mark.parametrize("timestamp", ["abc", "0x10", "1e9", "", "+1700000000", "1_700_000_000",
                                       "١٧٠٠٠٠٠٠٠٠", "9" * 40])
def test_a_timestamp_header_that_is_not_seconds_is_401(served: Served, timestamp: str) -> None:
    body = b"text=hello"
    served.mark()
    assert served.post(body, {**unsigned(body), "X-Slack-Request-Timestamp": timestamp}) == 401
    assert "500" not in served.grown() and "Traceback" not in served.grown()


@pytest.mark.parametrize("body", ["payload=%7Bnot-json", "{", "payload=" + "%5B" * 100_000, "payload=%5B1%5D"])
def test_a_malformed_unsigned_body_is_401(served: Served, body: str) -> None:
    served.mark()
    assert served.post(body.encode(), unsigned(body.encode())) == 401
    assert "Traceback" not in served.grown()


def test_a_body_that_is_not_utf8_is_400(served: Served) -> None:
    served.mark()
    assert served.post(b"text=\xff\xfe", unsigned(b"")) == 400
    assert "Traceback" not in served.grown()


@pytest.mark.parametrize("body", ["payload=%7Bnot-json", "{", "payload=" + "%5B" * 100_000, "payload=%5B1%5D"])
def test_a_malformed_signed_body_is_400(served: Served, body: str) -> None:
    served.mark()
    assert served.post(body.encode(), signed_headers(SECRET, body)) == 400
    assert "Traceback" not in served.grown()


def test_a_stale_signed_request_is_401_and_the_log_says_check_the_clock(served: Served) -> None:
    body = served.desk.slash_body("status")
    served.mark()
    assert served.post(body.encode(), signed_headers(SECRET, body, timestamp=int(time.time()) - 600)) == 401
    # the only stale request of the module, so its line is not held back as a repeat of another's
    assert re.search(r"WARNING adapters.slack.route: slack: refused a request: timestamp 60[01] s old: check the "
                     r"clock\n", served.bot.log())


def test_a_signed_request_is_still_served(served: Served) -> None:
    body = served.desk.slash_body("help")
    assert served.post(body.encode(), signed_headers(SECRET, body)) == 200


def test_a_70_kb_url_is_refused_by_the_real_server(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as conn:
        conn.sendall(b"POST /slack/events?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
        answer = conn.recv(4096)
    assert answer.split(b" ", 2)[1] in {b"414", b"431", b"400"}, answer[:80]
