"""The FastAPI application: routes, authentication, errors as JSON, metrics, access logs."""

from __future__ import annotations

import time
import uuid
from typing import Any

import structlog
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral import __version__
from corral.api import config_routes, pool_routes, resource_routes, user_routes, workflow_routes
from corral.api.auth import Authorizer, AuthSettings, config_roles
from corral.api.deps import Caller
from corral.api.guard import RequestGuard, RequestLimits
from corral.api.metrics import Metrics
from corral.api.openapi import corral_openapi
from corral.api.responses import Health, ServiceVersion
from corral.domain.configs.config_type import ConfigType
from corral.domain.formats.documents import position_of
from corral.errors import CorralError
from corral.services.config_service import WriteResult
from corral.services.runtime import Runtime

log = structlog.get_logger("corral.api")


def create_app(
    runtime: Runtime, auth: AuthSettings | None = None, limits: RequestLimits | None = None
) -> FastAPI:
    """The app over ``runtime``; ``auth`` (default: from the environment, see docs/access.md)
    holds the session key and the trusted OIDC issuer; ``limits`` bounds request bodies."""
    # The schema is served only to authenticated callers (below); no unauthenticated UI pages.
    # No redirect of "/path/" to "/path": a DELETE of ".../BACKEND/" (an empty item name)
    # was sent on, with its method, to the type's own path.
    app = FastAPI(
        title="corral",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
    )
    metrics = Metrics()
    settings = auth or AuthSettings.from_env()
    authorizer = Authorizer(
        runtime.tokens,
        runtime.users,
        config_roles(runtime.configs),
        settings,
        runtime.revoked_sessions,
    )
    app.state.runtime = runtime
    app.state.authorizer = authorizer
    app.state.auth_settings = settings

    def count_write(result: WriteResult) -> None:
        for revision in result.revisions:
            metrics.config_writes.labels(revision.config_type.value).inc()

    app.state.on_config_write = count_write
    for routes in (config_routes, pool_routes, resource_routes, workflow_routes, user_routes):
        app.include_router(routes.router)

    @app.get(
        "/health",
        tags=["system"],
        response_model=Health,
        responses={503: {"model": Health, "description": "The database does not answer."}},
    )
    def health() -> JSONResponse:
        ok = runtime.database_ok()
        body = {
            "status": "ok" if ok else "unavailable",
            "database": "ok" if ok else "down",
            "version": __version__,
            # leader: this server runs the lifecycle controller; standby: another one does
            "controller": runtime.controller_role(),
        }
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/api/version", tags=["system"], response_model=ServiceVersion)
    def service_version() -> dict[str, str]:
        """OSMO's version answer (public, as OSMO's: its CLI asks without logging in)."""
        major, minor, revision = __version__.split(".")[:3]
        return {"major": major, "minor": minor, "revision": revision, "hash": ""}

    @app.get("/openapi.json", include_in_schema=False)
    def openapi(caller: Caller) -> dict[str, Any]:
        del caller  # authenticated: that is all this needs
        return app.openapi()

    @app.get("/metrics", tags=["system"], response_class=PlainTextResponse)
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    _install_error_handlers(app)
    # Added before the observability middleware, so that it runs inside it: requests the
    # guard refuses are counted and logged like any other.
    app.add_middleware(RequestGuard, authorizer=authorizer, limits=limits or RequestLimits())
    _install_observability(app, metrics)
    app.openapi = lambda: corral_openapi(app)  # type: ignore[method-assign]
    return app


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(CorralError)
    async def corral_error(_: Request, err: CorralError) -> JSONResponse:
        return error_json(err)

    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        allowed = allowed_methods(app, request) if err.status_code == 405 else []
        if allowed:
            return JSONResponse(
                {
                    "message": f"{request.method} is not a method of {request.url.path}; use "
                    f"{', '.join(allowed)}.",
                    "error_code": "METHOD_NOT_ALLOWED",
                },
                status_code=405,
                headers={"Allow": ", ".join(allowed)},
            )
        if err.status_code == 405 or (err.status_code == 404 and err.detail == "Not Found"):
            return JSONResponse(
                {"message": no_such_path(request), "error_code": "NOT_FOUND"}, status_code=404
            )
        code = "NOT_FOUND" if err.status_code == 404 else "HTTP"
        return JSONResponse(
            {"message": str(err.detail), "error_code": code},
            status_code=err.status_code,
            headers=err.headers,
        )

    @app.exception_handler(DBAPIError)
    async def database_error(request: Request, err: DBAPIError) -> JSONResponse:
        if not err.connection_invalidated:
            return await unexpected(request, err)
        # The database went away under a pooled connection (a restart, a fail-over): the pool
        # reconnects for the next request; this one's transaction did not commit, or its answer
        # was lost.
        log.warning("database connection lost", path=request.url.path)
        return JSONResponse(
            {
                "message": "The connection to the database was lost; send the request again "
                "(a submission sent again with its Idempotency-Key is not made twice).",
                "error_code": "UNAVAILABLE",
            },
            status_code=503,
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, err: Exception) -> JSONResponse:
        incident = uuid.uuid4().hex[:12]
        log.exception("unhandled error", incident=incident, path=request.url.path)
        return JSONResponse(
            {
                "message": f"Internal server error (incident {incident}); this is a bug.",
                "error_code": "SERVER",
            },
            status_code=500,
        )


async def invalid_request(request: Request, err: RequestValidationError) -> JSONResponse:
    """A malformed body or query: 400 naming the field (or the body's line and column)."""
    body = (await request.body()).decode("utf-8", "replace")
    return JSONResponse(_request_error(err.errors(), body), status_code=400)


def request_error_message(errors: Any) -> str:
    """What :func:`invalid_request` says of a malformed query (no body involved)."""
    return str(_request_error(errors, "")["message"])


#: The methods a route may take (``Allow`` names those some route takes at a path).
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(app: FastAPI, request: Request) -> list[str]:
    """Every method some route of the app takes at the request's path (for ``Allow``)."""
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in app.router.routes
        )
    ]


def no_such_path(request: Request) -> str:
    message = (
        f"{request.url.path} is not a path of this API; GET /openapi.json lists them (docs/api.md)."
    )
    if request.url.path.startswith("/api/configs/"):
        names = ", ".join(t.url_segment for t in ConfigType)
        message += f" Config types: {names}."
    return message


def error_json(err: CorralError) -> JSONResponse:
    """A user error as every endpoint answers it: ``{"message", "error_code", ...}``."""
    return JSONResponse(err.to_dict(), status_code=err.status_code)


def _request_error(errors: Any, body: str) -> dict[str, Any]:
    """A malformed request body or query, in the same shape as every other user error."""
    first = errors[0]
    location = list(first["loc"])
    if location[:1] == ["body"]:  # FastAPI's prefix; a key may be called "body" too
        location = location[1:]
    if first["type"] == "json_invalid":
        offset = location[-1] if location and isinstance(location[-1], int) else 0
        where = position_of(body, offset)
        reason = first.get("ctx", {}).get("error", "syntax error")
        return {"message": f"request body:{where}: invalid JSON: {reason}", "error_code": "USER"}
    field = ".".join(str(step) for step in location)
    if first["type"] == "extra_forbidden":
        message = f"Unknown key '{location[-1]}' in the request"
    elif first["type"] == "missing":
        message = "Required field is missing"
    else:
        message = str(first["msg"]).removeprefix("Value error, ")
    return {
        "message": f"{field}: {message}" if field else message,
        "error_code": "USER",
        "field": field,
        "path": location,
    }


def _install_observability(app: FastAPI, metrics: Metrics) -> None:
    app.add_middleware(_Observe, metrics=metrics)


class _Observe:
    """Counts, times and logs every request (a plain ASGI middleware: Starlette's
    ``BaseHTTPMiddleware`` costs a task group and a stream per request)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless the app answers: an exception becomes a 500 outside

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            template = getattr(scope.get("route"), "path_format", "unmatched")
            elapsed = time.perf_counter() - started
            method = str(scope["method"])
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(elapsed)
            # Never log headers: they carry the bearer token.
            log.info(
                "request", method=method, route=template, status=status, ms=round(elapsed * 1000, 1)
            )
