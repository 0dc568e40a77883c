"""The dashboard's config page: a type's current document, its history and diffs, and a
rollback for those who may update it (docs/dashboard.md#config)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from corral.api.deps import AuthorizerDep, ConfigsDep, HistoryQuery
from corral.domain.configs.types import ConfigType
from corral.domain.views.paging import MAX_OFFSET, Page
from corral.errors import UserError
from corral.services.config_writes import WriteMeta
from corral.web.page_context import PageContextDep

#: Revision numbers are 32-bit integers in the store.
MAX_REVISION = 2**31 - 1
HISTORY_SHOWN = 20


router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/config", response_class=HTMLResponse)
def config(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    page: PageContextDep,
    request: Request,
    type: str = "POOL",
    first: Annotated[int | None, Query(ge=1, le=MAX_REVISION)] = None,
    second: Annotated[int | None, Query(ge=1, le=MAX_REVISION)] = None,
    rolled_back: Annotated[int | None, Query(ge=1, le=MAX_REVISION)] = None,
    made: Annotated[int, Query(ge=0, le=MAX_REVISION)] = 0,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> HTMLResponse:
    principal = page.caller(request)
    types = [
        t
        for t in ConfigType
        if authorizer.allows(principal, "config:Read", f"config/{t.url_segment}")
    ]
    chosen = ConfigType.parse(type)
    authorizer.check(principal, "config:Read", f"config/{chosen.url_segment}")
    data, head = configs.snapshot(chosen)
    items, total = Page(offset), 0
    if not chosen.singleton:  # a page of the items: 5,000 pools made 10 MB
        total = len(data)
        data = {name: data[name] for name in items.of(sorted(data))}
    history = configs.history(
        HistoryQuery(config_types=[chosen], limit=HISTORY_SHOWN, order="DESC"),
        with_data=False,
    )
    diff = None
    if first is not None:
        diff = configs.diff(chosen, first, second)
    return page.render(
        request,
        "config.html",
        types=types,
        chosen=chosen,
        data=data,
        head=head,
        history=history,
        diff=diff,
        page=items,
        total=total,
        paged=lambda at: "/ui/config?" + urlencode({"type": chosen.value, "offset": at}),
        first=first,
        second=second,
        rolled_back=rolled_back,
        made=made,
        may_update=authorizer.allows(principal, "config:Update", f"config/{chosen.url_segment}"),
    )


@router.post("/config/{segment}/rollback", response_class=HTMLResponse)
async def rollback(
    authorizer: AuthorizerDep,
    configs: ConfigsDep,
    page: PageContextDep,
    request: Request,
    segment: str,
) -> HTMLResponse:
    principal = page.caller(request)
    chosen = ConfigType.parse(segment)
    authorizer.check(principal, "config:Update", f"config/{chosen.url_segment}")
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    revision = _number(form, "revision")
    base = _number(form, "base")
    meta = WriteMeta(
        principal.username,
        description=f"Rolled back from the dashboard to r{revision}",
        base_revision=base,
    )
    result = await run_in_threadpool(configs.rollback, chosen, revision, meta)
    made = result.revisions[0].revision if result.revisions else 0
    # The page is drawn again (htmx follows HX-Location): it shows the new revision.
    target = "/ui/config?" + urlencode(
        {"type": chosen.value, "rolled_back": revision, "made": made}
    )
    return HTMLResponse("", headers={"HX-Location": target})


def _number(form: Mapping[str, list[str]], name: str) -> int:
    text = form.get(name, [""])[0]
    if not text.isdigit() or not 1 <= int(text) <= MAX_REVISION:
        raise UserError(f"{name}: give a revision number (got {text!r}).")
    return int(text)
