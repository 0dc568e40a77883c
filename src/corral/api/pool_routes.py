"""``/api/pool/...``: views of pools for admins and users."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import AfterValidator, WithJsonSchema

from corral.api import responses as R
from corral.api.deps import AuthorizerDep, Caller, CapacityDep, ConfigsDep, ForecastsDep
from corral.domain.platform.render import pool_topology
from corral.domain.platform.variables import SET_PATTERN, parse_set_values
from corral.errors import NotFoundError
from corral.services.commands import rendered_pool
from corral.services.free_shapes import pool_shapes
from corral.services.runtime import utc_now


def _assignment(text: str) -> str:
    parse_set_values([text])  # raises the message naming the form
    return text


#: ``NAME=VALUE``, declared by its pattern and checked with ``--set``'s own message.
SetValue = Annotated[
    str,
    AfterValidator(_assignment),
    WithJsonSchema({"type": "string", "pattern": SET_PATTERN}),
]


router = APIRouter(prefix="/api/pool", tags=["pools"])


@router.get("/{pool}/render", response_model=R.PoolRender)
def render(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    pool: str,
    platform: str | None = None,
    set: Annotated[list[SetValue], Query()] = [],  # noqa: B006 - FastAPI query list
) -> dict[str, Any]:
    """The platform's merged, rendered pod template with provenance, defaults, rules and
    group templates; ``set=NAME=VALUE`` (repeatable) overrides variables."""
    return rendered_pool(authorizer, caller, service.state(), pool, platform, parse_set_values(set))


@router.get("/{pool}/topology", response_model=R.PoolTopology)
def topology(
    authorizer: AuthorizerDep, service: ConfigsDep, caller: Caller, pool: str
) -> dict[str, Any]:
    """The pool's topology levels, coarsest first: what workflows may name in
    ``resources.<spec>.topology[].key``."""
    authorizer.check(caller, "pool:List")
    return pool_topology(service.state(), pool)


@router.get("/{pool}/shapes", response_model=R.PoolShapes)
def shapes(
    authorizer: AuthorizerDep,
    capacity: CapacityDep,
    service: ConfigsDep,
    forecasts: ForecastsDep,
    caller: Caller,
    pool: str,
    priority: Annotated[str, Query(pattern="^(?i:HIGH|NORMAL|LOW)$")] = "NORMAL",
) -> dict[str, Any]:
    """Per domain of the pool's finest topology level: trays healthy, free and in all, the
    largest gang of whole-node tasks the scheduler would place there now for work of
    ``priority`` (the pool's quota and the NVLink fabric included), and when it is next wholly
    free."""
    authorizer.check(caller, "pool:List")
    state = service.state()
    if pool not in authorizer.allowed_pools(caller, state.pool_names()):
        raise NotFoundError(
            f"Pool {pool} does not exist, or you may not use it: `corral pool list` shows yours."
        )
    return pool_shapes(state, capacity(state), forecasts, pool, utc_now(), priority.upper())
