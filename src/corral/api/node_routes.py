"""``/api/nodes/{node}/...``: cordon, uncordon, fail and heal a node of the embedded cluster,
and its audited history (docs/health.md#changing-a-nodes-health). corral's own endpoints: OSMO
has none. Each change needs ``node:Update`` on a pool the node serves."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import Field

from corral.api import responses as R
from corral.api.auth import Authorizer, Principal
from corral.api.deps import AuthorizerDep, Caller, NodeChange, NodesDep
from corral.api.schemas import StrictBody
from corral.domain.formats.wire_time import wire_time
from corral.domain.platform.node_health import health_json
from corral.errors import UserError
from corral.services.nodes import MAX_REASON, NodeAction, NodeAdmin

router = APIRouter(prefix="/api/nodes", tags=["nodes"])


class ChangeBody(StrictBody):
    reason: Annotated[str, Field(max_length=MAX_REASON)] = ""
    #: With ``fail`` only: cut the tray off its NVLink fabric (it stays Ready).
    fabric: bool = False


def _admin(authorizer: Authorizer, caller: Principal) -> NodeAdmin:
    return NodeAdmin(
        caller.username, lambda action, resource: authorizer.check(caller, action, resource)
    )


@router.post("/{node}/{action}", response_model=R.NodeChangeView)
def change(
    authorizer: AuthorizerDep,
    nodes: NodesDep,
    caller: Caller,
    node: str,
    action: NodeAction,
    body: Annotated[ChangeBody | None, Body()] = None,
) -> dict[str, Any]:
    """``cordon``: no new pod goes to the node, what runs there keeps running; ``uncordon``;
    ``fail``: the simulated tray goes NotReady (with ``fabric``: loses its NVLink fabric);
    ``heal``: Ready again, its fabric healthy (a cordon stays)."""
    found = body or ChangeBody()
    if found.fabric and action is not NodeAction.FAIL:
        raise UserError(f"only fail takes it, not {action.value}; leave it out", path=("fabric",))
    admin = _admin(authorizer, caller)
    return change_json(nodes.change(admin, node, action, found.reason, fabric_only=found.fabric))


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
