"""Live pages: ``/ui/events`` streams server-sent events that tell a page to draw itself again.

A stream polls a cheap marker of what its page shows (:meth:`WorkflowStore.change_marker`:
two small queries for the workflow list, three for one workflow) every
:data:`POLL_SECONDS` and sends ``changed`` when it moves; the page then fetches itself again
(htmx). Streams are bounded: at most :data:`MAX_STREAMS` at once per server (more are answered
503, and the browser retries), each closed after :data:`STREAM_SECONDS` (the browser
reconnects), so that no client can hold the server's threads or sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from corral.api.auth import Authorizer
from corral.api.guard import guarded_principal
from corral.errors import CorralError, ForbiddenError, UnavailableError, UserError
from corral.store.workflows import WorkflowStore

POLL_SECONDS = 1.0
#: A comment line this often keeps proxies from closing an idle stream.
KEEPALIVE_SECONDS = 15.0
STREAM_SECONDS = 300.0
MAX_STREAMS = 100


def build_events(
    store: WorkflowStore, authorizer: Authorizer, poll_seconds: float = POLL_SECONDS
) -> APIRouter:
    router = APIRouter(prefix="/ui", include_in_schema=False)
    open_streams = [0]

    @router.get("/events")
    async def events(request: Request, topic: str = "workflows") -> StreamingResponse:
        principal = guarded_principal(request)
        if principal is None:
            raise ForbiddenError("Log in to see the dashboard.")
        workflow_id = _workflow_of(topic)
        if workflow_id is not None:
            found = await run_in_threadpool(store.get, workflow_id)
            authorizer.check(principal, "workflow:Read", f"pool/{found.pool}")
        if open_streams[0] >= MAX_STREAMS:
            raise UnavailableError(
                f"This server already streams {MAX_STREAMS} live pages; the page retries."
            )

        def marker() -> Any:
            return store.change_marker(workflow_id)

        return StreamingResponse(
            _stream(marker, open_streams, poll_seconds),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return router


def _workflow_of(topic: str) -> str | None:
    if topic == "workflows":
        return None
    kind, _, name = topic.partition(":")
    if kind != "workflow" or not name:
        raise UserError(f"topic={topic!r}: use 'workflows' or 'workflow:<id>'.")
    return name


async def _stream(
    marker: Callable[[], Any], open_streams: list[int], poll_seconds: float
) -> AsyncIterator[str]:
    open_streams[0] += 1
    try:
        loop = asyncio.get_running_loop()
        ends = loop.time() + STREAM_SECONDS
        quiet_since = loop.time()
        last = await run_in_threadpool(marker)
        yield "retry: 2000\n\n"
        while loop.time() < ends:
            await asyncio.sleep(poll_seconds)
            try:
                now = await run_in_threadpool(marker)
            except CorralError:
                return  # the workflow is gone: the page's next load says so
            if now != last:
                last = now
                quiet_since = loop.time()
                yield "event: changed\ndata: 1\n\n"
            elif loop.time() - quiet_since > KEEPALIVE_SECONDS:
                quiet_since = loop.time()
                yield ": keep-alive\n\n"
    finally:
        open_streams[0] -= 1
