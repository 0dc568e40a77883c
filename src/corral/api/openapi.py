"""The OpenAPI document, made true to what the server answers.

FastAPI documents a 422 with its own error shape for every route with parameters; corral
answers 400 with :class:`ErrorBody` instead (``app.py``). So the document drops the 422s and
declares, for every route but the public probes, the errors any request may get: 400 (a
malformed or invalid request), 401 (no valid token: the request guard), 403 (a role policy),
404 (an unknown name), 409 (a conflict) and, for requests with a body, 413 (over the size
limit). Every non-public route requires a bearer token.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from corral.api.guard import PUBLIC_PATHS
from corral.api.responses import ErrorBody

ERRORS = {
    "400": "The request is invalid; the message names the field and what to do.",
    "401": "No valid bearer token.",
    "403": "A role policy denies the request.",
    "404": "A name in the request does not exist.",
    "409": "The request conflicts with the current state.",
    "413": "The body is larger than the server's limit (corral server --max-body-bytes).",
}
_WITH_BODY = ("post", "put", "patch", "delete")
_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
_UNUSED = ("HTTPValidationError", "ValidationError")


def corral_openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document (built once)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        schemas["ErrorBody"] = ErrorBody.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
        for name in _UNUSED:
            schemas.pop(name, None)
        components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                _declare_errors(operation, method, public=path in PUBLIC_PATHS)
        _share(schema["paths"], "/api/configs/{segment}/{name}", BACKEND_ITEM, "segment")
        app.openapi_schema = schema
    return app.openapi_schema


#: OSMO's backend update path, which a URL of a backend item matches before the generic item
#: path (a concrete segment wins in OpenAPI): it must document the generic item's methods too.
BACKEND_ITEM = "/api/configs/backend/{name}"


def _share(paths: dict[str, Any], generic: str, specific: str, fixed: str) -> None:
    """Give ``specific`` every method of ``generic`` it lacks, without the ``fixed``
    parameter (which the specific path's concrete segment gives)."""
    for method, operation in paths.get(generic, {}).items():
        if method in paths[specific]:
            continue
        shared = copy.deepcopy(operation)
        shared["parameters"] = [p for p in shared.get("parameters", []) if p["name"] != fixed]
        shared["operationId"] = f"{operation['operationId']}_{specific.split('/')[3]}"
        paths[specific][method] = shared


def _declare_errors(operation: dict[str, Any], method: str, *, public: bool) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    if public:
        return
    operation["security"] = [{"bearer": []}]
    for code, description in ERRORS.items():
        if code == "413" and method not in _WITH_BODY:
            continue
        responses.setdefault(
            code,
            {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}},
        )
