"""Live pages: ``/ui/events`` streams server-sent events that tell a page to draw itself again.

A stream polls a cheap marker of what its page shows (:meth:`WorkflowStore.change_marker`:
two small queries for the workflow list, three for one workflow) every
:data:`POLL_SECONDS` and sends ``changed`` when it moves; the page then fetches itself again
(htmx). Streams are bounded so that no client can hold the server's threads or sockets:

- a stream opens only for a caller who may read its topic (``workflow:List``, or
  ``workflow:Read`` on the workflow's pool);
- at most :data:`MAX_STREAMS_PER_USER` at once per user (more are answered 429) and
  :data:`MAX_STREAMS` per server (503; the browser retries), counted when the request is
  admitted and released when its response ends, however it ends;
- each is closed after :data:`STREAM_SECONDS` (the browser reconnects).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, cast

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from corral.api.deps import AuthorizerDep, ListingsDep, WorkflowsDep
from corral.api.guard import guarded_principal
from corral.errors import (
    CorralError,
    ForbiddenError,
    TooManyRequestsError,
    UnavailableError,
    UserError,
)
from corral.services.commands import read_workflow

POLL_SECONDS = 1.0
#: A comment line this often keeps proxies from closing an idle stream.
KEEPALIVE_SECONDS = 15.0
STREAM_SECONDS = 300.0
MAX_STREAMS = 100
MAX_STREAMS_PER_USER = 8


class StreamSlots:
    """How many streams are open, per user and in all. Taken and released on the event loop
    only, with no ``await`` between the check and the count: two requests cannot both take the
    last slot."""

    def __init__(self, per_server: int = MAX_STREAMS, per_user: int = MAX_STREAMS_PER_USER):
        self.per_server = per_server
        self.per_user = per_user
        self.open: Counter[str] = Counter()

    def take(self, username: str) -> None:
        if self.open[username] >= self.per_user:
            raise TooManyRequestsError(
                f"{username} already has {self.per_user} live pages open; close some (a page "
                "that is not live still shows the state it was loaded in)."
            )
        if self.open.total() >= self.per_server:
            raise UnavailableError(
                f"This server already streams {self.per_server} live pages; the page retries."
            )
        self.open[username] += 1

    def release(self, username: str) -> None:
        self.open[username] -= 1
        if self.open[username] <= 0:
            del self.open[username]


class _SlotStream(StreamingResponse):
    """A stream that gives its slot back when its response ends, also when the client left
    before the first byte (a generator that never started runs no ``finally``)."""

    def __init__(self, content: AsyncIterator[str], slots: StreamSlots, username: str) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
        self._slots = slots
        self._username = username

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slots.release(self._username)


router = APIRouter(prefix="/ui", include_in_schema=False)


async def stream_slots_of(request: Request) -> StreamSlots:
    """The server's live-page slots (one set per app, made with it: ``web/app.py``)."""
    return cast(StreamSlots, request.app.state.stream_slots)


@router.get("/events")
async def events(
    authorizer: AuthorizerDep,
    store: WorkflowsDep,
    listings: ListingsDep,
    streams: Annotated[StreamSlots, Depends(stream_slots_of)],
    request: Request,
    topic: str = "workflows",
) -> StreamingResponse:
    principal = guarded_principal(request)
    if principal is None:
        raise ForbiddenError("Log in to see the dashboard.")
    workflow_id = _workflow_of(topic)
    if workflow_id is None:
        authorizer.check(principal, "workflow:List")
    else:
        await run_in_threadpool(read_workflow, store, authorizer, principal, workflow_id)
    streams.take(principal.username)  # after the last await: checked and counted at once

    def marker() -> Any:
        return listings.change_marker(workflow_id)

    return _SlotStream(_stream(marker, POLL_SECONDS), streams, principal.username)


def _workflow_of(topic: str) -> str | None:
    if topic == "workflows":
        return None
    kind, _, name = topic.partition(":")
    if kind != "workflow" or not name:
        raise UserError(f"topic={topic!r}: use 'workflows' or 'workflow:<id>'.")
    return name


async def _stream(marker: Callable[[], Any], poll_seconds: float) -> AsyncIterator[str]:
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
