"""``/api/nodes/{node}/...``: cordon, drain, uncordon, fail and heal a node of the embedded cluster,
and its audited history (docs/health.md#changing-a-nodes-health). corral's own endpoints: OSMO
has none. Each change needs ``node:Update`` on a pool the node serves."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import Field, StrictBool

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import AuthorizerDep, Caller, NodeChange, NodesDep
from corral.api.schemas import ShownText, StrictBody
from corral.domain.formats.wire_time import wire_time
from corral.domain.platform.node_health import health_json
from corral.services.nodes import (
    DEFAULT_DRAIN_GRACE_S,
    MAX_DRAIN_GRACE_S,
    MAX_REASON,
    NodeAction,
    NodeAdmin,
)

router = APIRouter(prefix="/api/nodes", tags=["nodes"])


class ChangeBody(StrictBody):
    reason: Annotated[ShownText, Field(max_length=MAX_REASON)] = ""


class DrainBody(ChangeBody):
    #: How long each task gets to stop, in seconds.
    grace_seconds: Annotated[float, Field(ge=0, le=MAX_DRAIN_GRACE_S)] = DEFAULT_DRAIN_GRACE_S


class FailBody(ChangeBody):
    #: Cut the tray off its NVLink fabric only (it stays Ready).
    fabric: StrictBool = False


def _admin(authorizer: Authorizer, caller: Principal) -> NodeAdmin:
    return NodeAdmin(
        caller.username, lambda action, resource: authorizer.check(caller, action, resource)
    )


async def _action(request: Request) -> NodeAction:
    """The verb a change route was called as: the last segment of its path."""
    return NodeAction(request.scope["route"].path.rsplit("/", 1)[1])


@router.post("/{node}/cordon", response_model=R.NodeChangeView)
@router.post("/{node}/uncordon", response_model=R.NodeChangeView)
@router.post("/{node}/heal", response_model=R.NodeChangeView)
def change(
    authorizer: AuthorizerDep,
    nodes: NodesDep,
    caller: Caller,
    action: Annotated[NodeAction, Depends(_action)],
    node: str,
    body: Annotated[ChangeBody | None, Body()] = None,
) -> dict[str, Any]:
    """``cordon``: no new pod goes to the node, what runs there keeps running; ``uncordon``;
    ``heal``: the simulated tray is Ready again, its fabric healthy (a cordon stays)."""
    reason = body.reason if body else ""
    return change_json(nodes.change(_admin(authorizer, caller), node, action, reason))


@router.post("/{node}/drain", response_model=R.NodeChangeView)
def drain(
    authorizer: AuthorizerDep,
    nodes: NodesDep,
    caller: Caller,
    node: str,
    body: Annotated[DrainBody | None, Body()] = None,
) -> dict[str, Any]:
    """Cordon the node and stop what runs there, whole gangs, as a preemption would: each
    task gets ``grace_seconds`` to stop, then its exit actions decide (requeued or ended)."""
    found = body or DrainBody()
    admin = _admin(authorizer, caller)
    change = nodes.change(admin, node, NodeAction.DRAIN, found.reason, grace_s=found.grace_seconds)
    return change_json(change)


@router.post("/{node}/fail", response_model=R.NodeChangeView)
def fail(
    authorizer: AuthorizerDep,
    nodes: NodesDep,
    caller: Caller,
    node: str,
    body: Annotated[FailBody | None, Body()] = None,
) -> dict[str, Any]:
    """The simulated tray goes NotReady (with ``fabric``: loses its NVLink fabric)."""
    found = body or FailBody()
    admin = _admin(authorizer, caller)
    change = nodes.change(admin, node, NodeAction.FAIL, found.reason, fabric_only=found.fabric)
    return change_json(change)


@router.get("/{node}/history", response_model=R.NodeHistory)
def history(authorizer: AuthorizerDep, nodes: NodesDep, caller: Caller, node: str) -> Any:
    """The node's changes made on a running server, newest first."""
    authorizer.check(caller, "resources:Read")
    return {"node": node, "changes": [change_json(c) for c in nodes.history(node)]}


def change_json(change: NodeChange) -> dict[str, Any]:
    return {
        "node": change.node,
        "action": change.action,
        "by": change.by,
        "reason": change.reason,
        "at": wire_time(change.at),
        "before": health_json(change.before),
        "after": health_json(change.after),
    }
