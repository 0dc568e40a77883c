"""``/api/configs/...``: configs by type and name, history, diff, rollback, tags, bundles."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Response

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import (
    AuthorizerDep,
    Caller,
    ConfigsDep,
    HistoryQuery,
    Revision,
    WriteHook,
    WriteHookDep,
)
from corral.api.responses import LEAN
from corral.api.schemas import (
    REVISION_MAX,
    ApplyBody,
    ConfigTypeName,
    DeleteBody,
    HistoryTypeName,
    IsoTime,
    ItemName,
    PatchBody,
    RevisionPath,
    RevisionQuery,
    RollbackBody,
    SingletonTypeName,
    TagsBody,
    WriteBody,
)
from corral.domain.configs.bundles import parse_bundle
from corral.domain.configs.references import pool_warnings
from corral.domain.configs.types import ConfigType
from corral.domain.formats.wire_time import wire_time
from corral.domain.platform.resolved_pool import verbose_pool
from corral.errors import UserError
from corral.services.commands import check_template_reads
from corral.services.config_service import ConfigService, type_data
from corral.services.config_writes import SINGLETON, WriteMeta, WriteResult

REVISION_HEADER = "X-Corral-Revision"

router = APIRouter(prefix="/api/configs", tags=["configs"])


def can(authorizer: Authorizer, caller: Principal, action: str, ctype: ConfigType) -> None:
    authorizer.check(caller, action, resource(ctype))


def allowed_types(authorizer: Authorizer, caller: Principal, action: str) -> list[ConfigType]:
    """The config types ``caller`` may do ``action`` on; 403 when there is none. Each type is
    asked for by name: a request never names ``config/*`` (``domain/access/policies.py``)."""
    allowed = authorizer.check_any(
        caller, action, [resource(t) for t in ConfigType], "any config type"
    )
    return [t for t in ConfigType if resource(t) in allowed]


def resource(ctype: ConfigType) -> str:
    return f"config/{ctype.url_segment}"


def written(on_write: WriteHook, service: ConfigService, result: WriteResult) -> dict[str, Any]:
    on_write(result)
    pools = [
        i.name
        for i in result.items
        if i.config_type is ConfigType.POOL and i.action in ("created", "updated")
    ]
    warnings = pool_warnings(service.snapshot(ConfigType.POOL)[0], pools) if pools else []
    return {**write_json(result), **({"warnings": warnings} if warnings else {})}


@router.get("", response_model=R.ConfigList, **LEAN)
def list_configs(authorizer: AuthorizerDep, service: ConfigsDep, caller: Caller) -> dict[str, Any]:
    types = allowed_types(authorizer, caller, "config:Read")
    heads = [r for r in service.heads() if r.config_type in types]
    return {"configs": [revision_json(r, with_data=False) for r in heads]}


@router.get("/history", response_model=R.ConfigList, **LEAN)
def history(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    config_types: Annotated[list[HistoryTypeName], Query()] = [],  # noqa: B006 - FastAPI list
    name: str | None = None,
    revision: RevisionQuery = None,
    tags: Annotated[list[str], Query()] = [],  # noqa: B006
    created_before: IsoTime | None = None,
    created_after: IsoTime | None = None,
    at_timestamp: IsoTime | None = None,
    offset: Annotated[int, Query(ge=0, le=REVISION_MAX)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    order: Literal["ASC", "DESC", "asc", "desc"] = "ASC",
    omit_data: bool = False,
) -> dict[str, Any]:
    types = [ctype for ctype in config_types if ctype is not None]
    if config_types and not types:  # only OSMO's types that corral has no configs of
        return {"configs": []}
    for ctype in types:
        can(authorizer, caller, "config:Read", ctype)
    if not types:
        types = allowed_types(authorizer, caller, "config:Read")
    query = HistoryQuery(
        config_types=types,
        name=name,
        revision=revision,
        tags=tags,
        created_before=created_before,
        created_after=created_after,
        at_timestamp=at_timestamp,
        offset=offset,
        limit=limit,
        order="DESC" if order.upper() == "DESC" else "ASC",
    )
    found = service.history(query, with_data=not omit_data)
    return {"configs": [revision_json(r, with_data=not omit_data) for r in found]}


@router.post("/history/rollback", response_model=R.WriteAnswer, **LEAN)
def rollback(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    body: RollbackBody,
) -> dict[str, Any]:
    ctype = body.config_type
    can(authorizer, caller, "config:Update", ctype)
    return written(on_write, service, service.rollback(ctype, body.revision, _meta(caller, body)))


@router.delete("/history/{segment:config_type}/revision/{revision}", response_model=R.Message)
def delete_revision(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    revision: RevisionPath,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    service.delete_revision(ctype, revision, caller.username)
    return {"message": f"Deleted revision {revision} of {ctype.value}"}


@router.post(
    "/history/{segment:config_type}/revision/{revision}/tags",
    response_model=R.RevisionView,
    **LEAN,
)
def set_tags(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    revision: RevisionPath,
    body: TagsBody,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    updated = service.tag(ctype, revision, body.set_tags, body.delete_tags)
    return revision_json(updated, with_data=False)


@router.get("/diff", response_model=R.DiffAnswer)
def diff(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    config_type: ConfigTypeName,
    first_revision: RevisionQuery = None,
    second_revision: RevisionQuery = None,
) -> dict[str, Any]:
    ctype = config_type
    can(authorizer, caller, "config:Read", ctype)
    return service.diff(ctype, first_revision, second_revision)


@router.post("/apply", response_model=R.ApplyAnswer, **LEAN)
def apply(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    body: ApplyBody,
) -> dict[str, Any]:
    allowed_types(authorizer, caller, "config:Update")
    parsed = parse_bundle(body.bundle)
    for ctype in [*parsed.items, *([ConfigType.WORKFLOW] if parsed.workflow else [])]:
        can(authorizer, caller, "config:Update", ctype)
    result = service.apply(body.bundle, _meta(caller, body), dry_run=body.dry_run)
    return {
        "dry_run": body.dry_run,
        **(write_json(result) if body.dry_run else written(on_write, service, result)),
    }


@router.get("/{segment:config_type}")
def get_type(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    response: Response,
    verbose: bool = False,
) -> Any:
    ctype = segment
    can(authorizer, caller, "config:Read", ctype)
    if verbose and ctype is ConfigType.POOL:
        check_template_reads(authorizer, caller)
    data, revision = service.snapshot(ctype)
    response.headers[REVISION_HEADER] = str(revision)
    if verbose and ctype is ConfigType.POOL:
        state = service.state()
        data = {name: verbose_pool(state, name) for name in data}
    return wire_shape(ctype, data)


@router.put("/{segment:config_type}", response_model=R.WriteAnswer, **LEAN)
def put_type(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    body: WriteBody,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    return written(
        on_write, service, service.put_document(ctype, _required(body), _meta(caller, body))
    )


@router.patch("/{segment:config_type}", response_model=R.WriteAnswer, **LEAN)
def patch_type(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    segment: SingletonTypeName,
    body: PatchBody,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    if not ctype.singleton:
        raise UserError(
            f"PATCH one {ctype.label.lower()} at /api/configs/{ctype.url_segment}/<name>"
        )
    return written(
        on_write, service, service.patch(ctype, None, _required(body), _meta(caller, body))
    )


@router.get("/{segment:config_type}/{name}")
def get_item(
    authorizer: AuthorizerDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    name: str,
    response: Response,
    verbose: bool = False,
) -> Any:
    ctype = segment
    can(authorizer, caller, "config:Read", ctype)
    if verbose and ctype is ConfigType.POOL:
        check_template_reads(authorizer, caller)
    _, revision = service.snapshot(ctype)
    response.headers[REVISION_HEADER] = str(revision)
    item = service.item(ctype, name)
    if verbose and ctype is ConfigType.POOL:
        return verbose_pool(service.state(), name)
    return item


@router.put("/{segment:config_type}/{name}", response_model=R.WriteAnswer, **LEAN)
def put_item(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    name: ItemName,
    body: WriteBody,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    return written(
        on_write, service, service.put_item(ctype, name, _required(body), _meta(caller, body))
    )


@router.patch("/{segment:config_type}/{name}", response_model=R.WriteAnswer, **LEAN)
def patch_item(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    name: ItemName,
    body: PatchBody,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    return written(
        on_write, service, service.patch(ctype, name, _required(body), _meta(caller, body))
    )


@router.post("/backend/{name}", response_model=R.WriteAnswer, **LEAN)
def update_backend(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    name: ItemName,
    body: PatchBody,
) -> dict[str, Any]:
    """OSMO's backend update: the given top-level fields replace the stored ones."""
    can(authorizer, caller, "config:Update", ConfigType.BACKEND)
    return written(
        on_write,
        service,
        service.patch(ConfigType.BACKEND, name, _required(body), _meta(caller, body)),
    )


@router.delete("/{segment:config_type}/{name}", response_model=R.WriteAnswer, **LEAN)
def delete_item(
    authorizer: AuthorizerDep,
    on_write: WriteHookDep,
    service: ConfigsDep,
    caller: Caller,
    segment: ConfigTypeName,
    name: ItemName,
    body: Annotated[DeleteBody | None, Body()] = None,
) -> dict[str, Any]:
    ctype = segment
    can(authorizer, caller, "config:Update", ctype)
    meta = _meta(caller, body or DeleteBody())
    return written(on_write, service, service.delete_item(ctype, name, meta))


def _meta(caller: Principal, body: Any) -> WriteMeta:
    return WriteMeta(
        username=caller.username,
        description=body.description,
        tags=list(body.tags),
        base_revision=getattr(body, "base_revision", None),
    )


def _required(body: WriteBody) -> Any:
    document = body.document()
    if document is None:
        raise UserError("the request body needs 'configs' (or 'configs_dict')", path=("configs",))
    return document


def wire_shape(ctype: ConfigType, data: Any) -> Any:
    """OSMO's response shapes: pools wrapped, roles as a list, backends wrapped as a list."""
    if ctype is ConfigType.POOL:
        return {"pools": data}
    if ctype is ConfigType.ROLE:
        return list(data.values())
    if ctype is ConfigType.BACKEND:
        return {"backends": list(data.values())}
    return data


def revision_json(revision: Revision, *, with_data: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "config_type": revision.config_type.value,
        "revision": revision.revision,
        "name": revision.name,
        "username": revision.username,
        "created_at": wire_time(revision.created_at),
        "description": revision.description,
        "tags": revision.tags,
    }
    if with_data:
        body["changed"] = [{"name": i.name, "action": i.action} for i in revision.changed]
        body["data"] = wire_shape(revision.config_type, revision_data(revision))
    return body


def revision_data(revision: Revision) -> Any:
    """The type's whole config at the revision where it was read; else what the revision set."""
    ctype = revision.config_type
    if revision.data is not None:
        return type_data(ctype, revision.data)
    written = {i.name: i.data for i in revision.changed if i.data is not None}
    return written.get(SINGLETON) if ctype.singleton else written


def write_json(result: WriteResult) -> dict[str, Any]:
    return {
        "changed": result.changed,
        "revisions": [revision_json(r, with_data=False) for r in result.revisions],
        "items": [
            {
                "config_type": i.config_type.value,
                "name": i.name,
                "action": i.action,
                "changes": i.changes,
            }
            for i in result.items
        ],
    }
