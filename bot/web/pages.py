"""The routes of the pages and /metrics, on the bot's own Starlette app; on only when ``web.secret`` is set.

``GET /reviews/{id}`` opens with that review's signed link (``?t=``) or the
operator's token; ``GET /``, ``/runs/{id}`` and ``/metrics`` need the token
(``web.token``; without one they are not served). A missing, wrong or
expired credential answers 404 on a review page (nothing says the review
exists) and 401 elsewhere, with nothing else in the body. Every answer
carries a Content-Security-Policy that allows only this server's own style
sheet and script (no inline script or style), ``X-Frame-Options: DENY`` and
``Referrer-Policy: no-referrer``, so a link's token never leaves in a
Referer. Templates are Jinja2 with autoescape: loop text is shown, never run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.config import BotConfig
from bot.store.base import Store, StoreError, UnknownReviewError, UnknownRunError

from .links import ReviewLinks, bearer_ok
from .metrics import CONTENT_TYPE, Metrics
from .views import Scrub, dashboard, review_page, run_page

__all__ = ["SECURITY_HEADERS", "review_links", "web_routes"]

SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
                                "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
_STATIC = Path(__file__).parent / "static"
#: The local answer a page shows, run on the server (with its config).
DECIDE = "loopbot decide"


def review_links(config: BotConfig, clock: Callable[[], datetime]) -> ReviewLinks | None:
    """The signed links of this config's pages, or None when pages are off (no ``web.secret``)."""
    web = config.web
    if web.secret is None:
        return None
    return ReviewLinks(web.secret.get_secret_value(), web.base_url, web.link_ttl, clock)


def _secured(app: ASGIApp) -> ASGIApp:
    """The security headers on every answer of ``app`` (the static files)."""

    async def secured(scope: Scope, receive: Receive, send: Send) -> None:
        async def add(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"],
                                      *((k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()
                                        if k != "Cache-Control")]
            await send(message)

        await app(scope, receive, add)

    return secured


def _refused(status: int) -> Response:
    headers = dict(SECURITY_HEADERS)
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="loopbot", charset="UTF-8"'
    return PlainTextResponse("unauthorized\n" if status == 401 else "not found\n", status, headers=headers)


def web_routes(
    config: BotConfig,
    store: Store,
    *,
    clock: Callable[[], datetime],
    metrics: Metrics | None = None,
    next_runs: Callable[[], Mapping[str, datetime | None]] = dict,
) -> list[BaseRoute]:
    """The pages' routes for ``create_app``'s ``extra_routes``; none when pages are off.

    The decide lines a page shows are the bare ``loopbot decide``: the
    server's own (with its ``--config`` path) would name a path on the server.
    """
    links = review_links(config, clock)
    if links is None:
        return []
    token = config.web.token.get_secret_value() if config.web.token is not None else None
    scrub = Scrub(config.secret_values(), [str(config.state_dir), str(Path(config.state_dir).resolve())])
    env = Environment(loader=PackageLoader("bot.web", "templates"), autoescape=select_autoescape(default=True),
                      trim_blocks=True, lstrip_blocks=True)

    def page(name: str, **context: Any) -> Response:
        return HTMLResponse(env.get_template(name).render(**context), headers=SECURITY_HEADERS)

    def operator(request: Request) -> bool:
        return token is not None and bearer_ok(request.headers.get("authorization"), token)

    async def review(request: Request) -> Response:
        review_id = request.path_params["id"]
        signed = request.query_params.get("t")
        if not operator(request) and not links.valid(review_id, signed):
            return _refused(404)
        query = request.query_params.get("q", "")[:200]

        def build() -> dict[str, Any] | None:
            try:
                found = store.get_review(review_id)
            except (UnknownReviewError, StoreError, ValueError):
                return None
            return review_page(config, store, found, query, scrub, DECIDE)

        data = await run_in_threadpool(build)
        if data is None:
            return _refused(404)
        return page("review.html", **data, token=signed if links.valid(review_id, signed) else "",
                    operator=operator(request))

    routes: list[BaseRoute] = [
        Route("/reviews/{id}", review, methods=["GET"]),
        Mount("/static", app=_secured(StaticFiles(directory=_STATIC)), name="static"),
    ]
    if token is None:
        return routes

    async def home(request: Request) -> Response:
        if not operator(request):
            return _refused(401)
        try:
            number = int(request.query_params.get("page", "1"))
        except ValueError:
            number = 1
        data = await run_in_threadpool(dashboard, config, store, clock(), number, scrub, next_runs)
        return page("dashboard.html", **data)

    async def run(request: Request) -> Response:
        if not operator(request):
            return _refused(401)

        def build() -> dict[str, Any] | None:
            try:
                found = store.get_run(request.path_params["id"])
            except (UnknownRunError, StoreError, ValueError):
                return None
            return run_page(store, found, scrub)

        data = await run_in_threadpool(build)
        return _refused(404) if data is None else page("run.html", **data)

    async def scrape(request: Request) -> Response:
        if not operator(request) or metrics is None:
            return _refused(401 if metrics is not None else 404)
        body = await run_in_threadpool(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE, headers=SECURITY_HEADERS)

    return [Route("/", home, methods=["GET"]), Route("/runs/{id}", run, methods=["GET"]),
            Route("/metrics", scrape, methods=["GET"]), *routes]
