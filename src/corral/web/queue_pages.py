"""The dashboard's Queue page (``/ui/queue``, docs/dashboard.md#queue): every waiting group
across the pools, in admission order, with its reason, start-time band, requested shape and
what it would borrow, as ``GET /api/queue`` answers it and with the same rules: a group the
caller may not read holds its place as ``(hidden)``."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from corral.api.deps import AuthorizerDep, ConfigsDep, RuntimeDep
from corral.domain.views.queue import start_text
from corral.domain.views.start_forecast import duration_text
from corral.services.commands import shown_in_queue
from corral.services.queue_view import forecast_accuracy, queue_view
from corral.services.runtime import utc_now
from corral.web.page_context import PageContextDep

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/queue", response_class=HTMLResponse)
def queue(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    context: PageContextDep,
    runtime: RuntimeDep,
    request: Request,
    pool: str = "",
) -> HTMLResponse:
    principal = context.caller(request)
    authorizer.check(principal, "workflow:List")

    now = utc_now()
    state = configs.state()
    entries = queue_view(
        state,
        runtime.workflows,
        runtime.forecasts,
        runtime.capacity(state),
        partial(shown_in_queue, authorizer, principal),
        now,
        pools=[pool] if pool else (),
    )
    for entry in entries:
        if not entry["hidden"]:
            entry["start"] = start_text(entry, now)
            entry["waited"] = duration_text(entry["waiting_s"])
    return context.render(
        request,
        "queue.html",
        topic="workflows",
        entries=entries,
        accuracy=forecast_accuracy(runtime.forecasts, [pool] if pool else ()),
        pools=context.usable_pools(principal),
        chosen=pool,
    )
