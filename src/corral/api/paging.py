"""The page a list of pools answers: ``offset`` and ``limit`` in the query (docs/api.md#pages).

OSMO's CLI reads these lists whole and follows no page: a page would silently drop pools from
its tables. It says who it is in every request (``x-osmo-client-version``), so a request that
carries that header and asks for no ``limit`` gets every pool, as from OSMO.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from corral.domain.views.paging import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, Page

#: The header OSMO's CLI sends with its version in every request.
OSMO_CLIENT_HEADER = "x-osmo-client-version"


async def page_of(
    request: Request,
    offset: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description="Pools to skip, in name order.")
    ] = 0,
    limit: Annotated[
        int | None,
        Query(ge=1, le=MAX_LIMIT, description=f"Pools on the page (default {DEFAULT_LIMIT})."),
    ] = None,
) -> Page:
    if limit is None and OSMO_CLIENT_HEADER in request.headers:
        return Page(offset, None)
    return Page(offset, limit or DEFAULT_LIMIT)


PageDep = Annotated[Page, Depends(page_of)]
