"""The FastAPI application: routes, authentication, errors as JSON, metrics, access logs."""

from __future__ import annotations

import time

import structlog
from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corral import __version__
from corral.api import (
    config_routes,
    node_routes,
    pool_routes,
    queue_routes,
    resource_routes,
    system_routes,
    task_routes,
    user_routes,
    workflow_routes,
)
from corral.api.auth import Authorizer, AuthSettings, config_roles
from corral.api.deps import refuse_unknown_query
from corral.api.errors import install_error_handlers
from corral.api.guard import RequestGuard, RequestLimits
from corral.api.metrics import Metrics
from corral.api.openapi import corral_openapi
from corral.services.runtime import Runtime

log = structlog.get_logger("corral.api")


def create_app(
    runtime: Runtime,
    auth: AuthSettings | None = None,
    limits: RequestLimits | None = None,
    *,
    access_log: bool = False,
) -> FastAPI:
    """The app over ``runtime``; ``auth`` (default: from the environment, see docs/access.md)
    holds the session key and the trusted OIDC issuer; ``limits`` bounds request bodies; with
    ``access_log``, every request is a log line (else only at the debug level)."""
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
    # What the routes depend on (api/deps.py).
    app.state.runtime = runtime
    app.state.authorizer = authorizer
    app.state.auth_settings = settings
    app.state.metrics = metrics
    app.state.on_config_write = metrics.count_write
    for routes in (
        config_routes,
        pool_routes,
        resource_routes,
        workflow_routes,
        task_routes,
        queue_routes,
        user_routes,
        node_routes,
        system_routes,
    ):
        app.include_router(routes.router, dependencies=[Depends(refuse_unknown_query)])
    install_error_handlers(app)
    # Added before the observability middleware, so that it runs inside it: requests the
    # guard refuses are counted and logged like any other.
    app.add_middleware(RequestGuard, authorizer=authorizer, limits=limits or RequestLimits())
    _install_observability(app, metrics, access_log)
    app.openapi = lambda: corral_openapi(app)  # type: ignore[method-assign]
    return app


def _install_observability(app: FastAPI, metrics: Metrics, access_log: bool) -> None:
    app.add_middleware(_Observe, metrics=metrics, access_log=access_log)


class _Observe:
    """Counts, times and logs every request (a plain ASGI middleware: Starlette's
    ``BaseHTTPMiddleware`` costs a task group and a stream per request)."""

    def __init__(self, app: ASGIApp, metrics: Metrics, access_log: bool) -> None:
        self.app = app
        self.metrics = metrics
        #: A line per request at info (``corral server --access-log``), else at debug.
        self.log = log.info if access_log else log.debug

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
            self.log(
                "request", method=method, route=template, status=status, ms=round(elapsed * 1000, 1)
            )
