"""The server's own endpoints: health, OSMO's version answer, the schema, the metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from corral import __version__
from corral.api.deps import Caller, ForecastsDep, ListingsDep, RuntimeDep
from corral.api.metrics import Metrics
from corral.api.responses import Health, ServiceVersion

router = APIRouter(tags=["system"])


@router.get(
    "/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "The database does not answer."}},
)
def health(runtime: RuntimeDep) -> JSONResponse:
    ok = runtime.database_ok()
    body = {
        "status": "ok" if ok else "unavailable",
        "database": "ok" if ok else "down",
        "version": __version__,
        # leader: this server runs the lifecycle controller; standby: another one does
        "controller": runtime.controller_role(),
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/api/version", response_model=ServiceVersion)
def service_version() -> dict[str, str]:
    """OSMO's version answer (public, as OSMO's: its CLI asks without logging in)."""
    major, minor, revision = __version__.split(".")[:3]
    return {"major": major, "minor": minor, "revision": revision, "hash": ""}


@router.get("/openapi.json", include_in_schema=False)
def openapi(caller: Caller, request: Request) -> dict[str, Any]:
    del caller  # authenticated: that is all this needs
    schema: dict[str, Any] = request.app.openapi()
    return schema


@router.get("/metrics", response_class=PlainTextResponse)
def prometheus(request: Request, listings: ListingsDep, forecasts: ForecastsDep) -> Response:
    metrics: Metrics = request.app.state.metrics
    metrics.set_forecast_figures(forecasts.records.accuracy(), forecasts.records.refreshes())
    metrics.set_node_fault_losses(listings.node_fault_losses())
    metrics.set_eviction_losses(listings.eviction_losses())
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
