"""The server's application: the REST API (``corral.api.app``) and the dashboard at ``/ui``."""

from __future__ import annotations

import threading
from pathlib import Path

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError

from corral.api.app import create_app
from corral.api.auth import AuthSettings
from corral.api.browser_session import is_ui
from corral.api.errors import error_json, invalid_request, request_error_message
from corral.api.guard import RequestLimits
from corral.domain.views.paging import Page
from corral.errors import CorralError, UserError
from corral.services.pool_usage import pool_usage
from corral.services.runtime import Runtime
from corral.web import config_pages, live, login_pages, pages, pool_pages, queue_pages
from corral.web.drawing import error_page

log = structlog.get_logger("corral.web")
FAVICON = Path(__file__).parent / "static" / "favicon.svg"


def create_server_app(
    runtime: Runtime,
    auth: AuthSettings | None = None,
    limits: RequestLimits | None = None,
    *,
    access_log: bool = False,
) -> FastAPI:
    """What ``corral server`` serves: the API of :func:`create_app` and the dashboard."""
    app = create_app(runtime, auth, limits, access_log=access_log)
    app.state.stream_slots = live.StreamSlots()
    for routes in (login_pages, pool_pages, pages, config_pages, queue_pages, live):
        app.include_router(routes.router)
    app.add_api_route("/favicon.ico", favicon, include_in_schema=False)
    app.add_exception_handler(CorralError, corral_error)
    app.add_exception_handler(RequestValidationError, invalid_query)
    return app


async def corral_error(request: Request, err: Exception) -> Response:
    """A dashboard page's user error is a page; everything else answers JSON."""
    assert isinstance(err, CorralError)  # registered for CorralError only
    if is_ui(request.url.path) and request.method == "GET":
        return error_page(request, err)
    return error_json(err)


async def invalid_query(request: Request, err: Exception) -> Response:
    """A dashboard page asked with a bad query value is a page naming the value."""
    assert isinstance(err, RequestValidationError)
    if is_ui(request.url.path) and request.method == "GET":
        return error_page(request, UserError(request_error_message(err.errors())))
    return await invalid_request(request, err)


def favicon() -> Response:
    """The dashboard's icon, for browsers that ask for it at the root."""
    return Response(
        FAVICON.read_bytes(),
        media_type="image/svg+xml",
        headers={"Cache-Control": "public, max-age=86400"},
    )


def warm_views(runtime: Runtime) -> None:
    """Fill the views' caches (every bound pod read, every pool's layout) in the background
    before the first page asks: at 9,000 bound pods that first read takes about a second."""
    threading.Thread(target=_warm, args=(runtime,), name="corral-warm-views", daemon=True).start()


def _warm(runtime: Runtime) -> None:
    try:
        state = runtime.configs.state()
        first_page = Page().of(sorted(state.pool_names()))
        pool_usage(state, runtime.capacity(state), first_page, {})
    except Exception:  # a view that cannot be warmed is computed on its first request
        log.warning("warming the dashboard's views failed", exc_info=True)
