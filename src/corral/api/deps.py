"""What a route depends on: the caller, and the parts of the server's runtime it uses.

The routes of ``api/`` and ``web/`` are module-level functions; each names the parts it needs as
parameters of these types, and FastAPI hands them over from ``app.state`` (set by
``api/app.py``). This is the only module of ``api/`` and ``web/`` that imports the store: a route
reaches stored data through the types below or through a service.

The dependencies are ``async`` so that FastAPI calls them on the event loop: they only read
``app.state``, and a sync dependency would cost each request a trip to a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, cast

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool

from corral.api.auth import Authorizer, Principal
from corral.api.guard import guarded_principal
from corral.domain.configs.snapshot import Configs
from corral.domain.workflows.record import StoredTask, StoredWorkflow
from corral.errors import UserError, quoted, shown
from corral.services.capacity import ClusterCapacity
from corral.services.config_service import ConfigService
from corral.services.config_writes import WriteResult
from corral.services.nodes import NodeService
from corral.services.runtime import Runtime
from corral.services.submission import SubmissionService
from corral.store.config_store import HistoryQuery, Revision
from corral.store.forecasts import ForecastStore
from corral.store.node_changes import NodeChange
from corral.store.tokens import TokenStore
from corral.store.users import User, UserStore
from corral.store.workflows import WorkflowStore
from corral.store.workflows.listings import WorkflowListings

__all__ = [
    "HistoryQuery",
    "NodeChange",
    "Revision",
    "User",
]

#: What the latest attempt of a task printed ("" before it started): ``Runtime.task_logs``.
TaskLogs = Callable[[StoredWorkflow, StoredTask], str]
#: Called with every config write's result (the API counts them in its metrics).
WriteHook = Callable[[WriteResult], None]


async def caller_of(request: Request) -> Principal:
    """Who is calling: every endpoint depends on this (401 without a valid token). The request
    guard authenticated the caller already (then this costs no trip to a worker thread); an app
    without it authenticates here."""
    found = guarded_principal(request)
    if found is not None:
        return found
    return await run_in_threadpool(_authorizer(request).authenticate, request)


def _runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


def _authorizer(request: Request) -> Authorizer:
    return cast(Authorizer, request.app.state.authorizer)


async def runtime_of(request: Request) -> Runtime:
    return _runtime(request)


async def authorizer_of(request: Request) -> Authorizer:
    return _authorizer(request)


async def configs_of(request: Request) -> ConfigService:
    return _runtime(request).configs


async def workflows_of(request: Request) -> WorkflowStore:
    return _runtime(request).workflows


async def listings_of(request: Request) -> WorkflowListings:
    return _runtime(request).listings


async def submissions_of(request: Request) -> SubmissionService:
    return _runtime(request).submissions


async def users_of(request: Request) -> UserStore:
    return _runtime(request).users


async def tokens_of(request: Request) -> TokenStore:
    return _runtime(request).tokens


async def capacity_of(request: Request) -> Callable[[Configs], list[ClusterCapacity]]:
    return _runtime(request).capacity


async def preempted_of(request: Request) -> Callable[[], Mapping[str, int]]:
    return _runtime(request).recently_preempted


async def lost_of(request: Request) -> Callable[[], Mapping[str, float]]:
    return _runtime(request).recently_lost


async def task_logs_of(request: Request) -> TaskLogs:
    return _runtime(request).task_logs


async def nodes_of(request: Request) -> NodeService:
    return _runtime(request).node_admin


async def forecasts_of(request: Request) -> ForecastStore:
    return _runtime(request).forecasts


async def write_hook_of(request: Request) -> WriteHook:
    return cast(WriteHook, request.app.state.on_config_write)


Caller = Annotated[Principal, Depends(caller_of)]
RuntimeDep = Annotated[Runtime, Depends(runtime_of)]
AuthorizerDep = Annotated[Authorizer, Depends(authorizer_of)]
ConfigsDep = Annotated[ConfigService, Depends(configs_of)]
WorkflowsDep = Annotated[WorkflowStore, Depends(workflows_of)]
ListingsDep = Annotated[WorkflowListings, Depends(listings_of)]
SubmissionsDep = Annotated[SubmissionService, Depends(submissions_of)]
UsersDep = Annotated[UserStore, Depends(users_of)]
TokensDep = Annotated[TokenStore, Depends(tokens_of)]
CapacityDep = Annotated[Callable[[Configs], list[ClusterCapacity]], Depends(capacity_of)]
PreemptedDep = Annotated[Callable[[], Mapping[str, int]], Depends(preempted_of)]
LostDep = Annotated[Callable[[], Mapping[str, float]], Depends(lost_of)]
WriteHookDep = Annotated[WriteHook, Depends(write_hook_of)]
NodesDep = Annotated[NodeService, Depends(nodes_of)]
TaskLogsDep = Annotated[TaskLogs, Depends(task_logs_of)]
ForecastsDep = Annotated[ForecastStore, Depends(forecasts_of)]


#: The request methods that write: an unknown query parameter on one is refused.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_declared: dict[int, frozenset[str]] = {}


async def refuse_unknown_query(request: Request) -> None:
    """400 for a query parameter the write's route does not take: ``?dry_run=true`` on a
    ``PUT`` of a role was ignored, and the write applied (docs/api.md#query-parameters)."""
    if request.method not in WRITES or not request.query_params:
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    known = _declared.get(id(route))
    if known is None:
        known = _declared[id(route)] = _query_names(dependant)
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        takes = ", ".join(sorted(known)) if known else "no query parameters"
        raise UserError(
            f"Unknown query parameter {quoted(unknown[0])} on {request.method} "
            f"{getattr(route, 'path', request.url.path)}: it "
            f"takes {takes}. Nothing was written.",
            path=(shown(unknown[0]),),
        )


def _query_names(dependant: Any) -> frozenset[str]:
    """The query parameters a route and its dependencies declare."""
    names: set[str] = set()
    stack = [dependant]
    while stack:
        current = stack.pop()
        names.update(field.alias for field in current.query_params)
        stack.extend(current.dependencies)
    return frozenset(names)
