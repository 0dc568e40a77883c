"""Every error as the API answers it: JSON ``{"message", "error_code", ...}`` with the status
its kind says; a malformed request names its field (or its body's line and column); a path or
method the API does not have says what it does have; anything unexpected is a 500 with an
incident id in the log, and never its details."""

from __future__ import annotations

import uuid
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from corral.domain.configs.config_type import ConfigType
from corral.domain.formats.documents import position_of
from corral.errors import CorralError, quoted, shown

log = structlog.get_logger("corral.api")


def install_error_handlers(app: FastAPI) -> None:
    """Every error answers JSON in one shape; an unexpected one is logged with an incident id."""
    app.add_exception_handler(CorralError, corral_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(DBAPIError, database_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, unexpected)


async def corral_error(_: Request, err: CorralError) -> JSONResponse:
    return error_json(err)


async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
    allowed = allowed_methods(request.app, request) if err.status_code == 405 else []
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
        f"{shown(request.url.path)} is not a path of this API; GET /openapi.json lists them "
        "(docs/api.md)."
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
    location = [step if isinstance(step, int) else shown(step) for step in location]
    field = ".".join(str(step) for step in location)
    if first["type"] == "extra_forbidden":
        message = f"Unknown key {quoted(first['loc'][-1])} in the request"
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
