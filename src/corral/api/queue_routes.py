"""``GET /api/queue``: every waiting group in admission order with its start-time forecast
(docs/forecast.md#the-queue). corral's own endpoint: OSMO has none."""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Query

from corral.api import responses as R
from corral.api.deps import (
    AuthorizerDep,
    Caller,
    CapacityDep,
    ConfigsDep,
    ForecastsDep,
    WorkflowsDep,
)
from corral.domain.formats.wire_time import wire_time
from corral.services.commands import shown_in_queue
from corral.services.queue_view import forecast_accuracy, queue_view
from corral.services.runtime import utc_now

router = APIRouter(tags=["workflows"])
Names = Annotated[list[str], Query()]


@router.get("/api/queue", response_model=R.QueueView)
def queue(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    forecasts: ForecastsDep,
    configs: ConfigsDep,
    capacity: CapacityDep,
    caller: Caller,
    pools: Names = [],  # noqa: B006 - FastAPI query list
    users: Names = [],  # noqa: B006
) -> dict[str, Any]:
    """Every waiting group, first to start first; ``pools`` and ``users`` narrow the groups
    shown, not the positions. Groups the caller may not read are opaque entries. With them,
    per pool, how good the published forecasts were."""
    authorizer.check(caller, "workflow:List")
    now = utc_now()
    state = configs.state()
    entries = queue_view(
        state,
        store,
        forecasts,
        capacity(state),
        partial(shown_in_queue, authorizer, caller),
        now,
        pools=pools,
        users=users,
    )
    accuracy = [asdict(pool) for pool in forecast_accuracy(forecasts, pools)]
    return {"at": wire_time(now), "entries": entries, "accuracy": accuracy}
