"""What the topology page draws, computed from the live cluster: the picture of a pool, who
owns each node (by name, or by an opaque tag for a caller who may not read the pool's
workflows), and the ghost of a waiting group. Pictures and ghosts are kept while the
configuration, the nodes and the bound pods are the same objects (services/memo.py): a page of
5,000 nodes is drawn once per change of the cluster."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

from corral.domain.labels import SUBMITTED_BY, WORKFLOW_ID
from corral.domain.workflows.record import ALIVE, StoredWorkflow
from corral.services.capacity import ClusterCapacity
from corral.services.memo import SameInputs
from corral.services.placement_now import GroupPlacement, OfferedGroup, groups_placed_now
from corral.services.pool_usage import gpus_per_node, layout_of, node_gpus
from corral.services.runtime import utc_now
from corral.web.topology_view import Level, TopologyPicture, picture

#: Group statuses before its pods are bound.
UNPLACED = frozenset({"SUBMITTING", "WAITING", "PROCESSING", "SCHEDULING"})


def pool_picture(
    state: Any,
    cluster: ClusterCapacity | None,
    pool: str,
    levels: tuple[Level, ...],
    within: tuple[str, str] | None,
) -> TopologyPicture:
    if cluster is None:
        return picture([], levels, {}, {}, {})
    return _pictures.get(
        (pool, levels, within),
        (state, cluster.nodes, cluster.pods),
        lambda: _draw(state, cluster, pool, levels, within),
    )


#: The topology pictures, kept while the configuration, the nodes and the bound pods are the
#: same objects (services/memo.py): a page of 5,000 nodes is drawn once per change.
_pictures: SameInputs[TopologyPicture] = SameInputs()


def _draw(
    state: Any,
    cluster: ClusterCapacity,
    pool: str,
    levels: tuple[Level, ...],
    within: tuple[str, str] | None,
) -> TopologyPicture:
    layout = layout_of(state, cluster.nodes, [pool])
    nodes = [node for node in cluster.nodes if pool in layout.pools_of(node.name)]
    owners: dict[str, set[str]] = {}
    for pod in cluster.pods:
        owners.setdefault(pod.node, set()).add(pod.labels.get(WORKFLOW_ID, "(not corral's)"))
    return picture(
        nodes,
        levels,
        node_gpus(cluster.nodes),
        gpus_per_node(cluster.pods),
        {node: sorted(found) for node, found in owners.items()},
        within,
    )


def owner_names(key: bytes, own: frozenset[str] | None) -> Callable[[str], str]:
    """How the page names a node's workflow: by its id when the caller may read the pool's
    workflows (``own`` is None) or submitted it, else by an opaque tag (one workflow, one tag:
    hovering still shows which nodes a workflow holds, not which workflow it is)."""

    def name(workflow_id: str) -> str:
        if own is None or workflow_id in own:
            return workflow_id
        digest = hmac.new(key, workflow_id.encode(), hashlib.sha256).hexdigest()[:8]
        return f"workflow-{digest}"

    return name


def own_workflows(cluster: ClusterCapacity, username: str) -> frozenset[str]:
    return frozenset(
        pod.labels.get(WORKFLOW_ID, "")
        for pod in cluster.pods
        if pod.labels.get(SUBMITTED_BY) == username
    )


def ghost_of(state: Any, workflow: StoredWorkflow, cluster: ClusterCapacity) -> GroupPlacement:
    """Where the workflow's first group that waits to start would land now, or why not."""
    waiting = [
        g
        for g in workflow.groups
        if g.status in UNPLACED and all(task.node is None for task in g.tasks)
    ]
    if workflow.status not in ALIVE or not waiting:
        return GroupPlacement("", reason=f"{workflow.workflow_id} has no group waiting to start")
    # The group the scheduler has tried (it has a reason), else the first to be offered.
    group = next((g for g in waiting if g.pending_reason), waiting[0])
    offered = [OfferedGroup(group.uuid, group.name, list(group.manifests or []))]
    return _ghosts.get(
        group.uuid,
        (state, cluster.nodes, cluster.pods),
        lambda: groups_placed_now(
            state, workflow.pool, workflow.priority, offered, cluster, utc_now()
        )[0],
    )


#: Where a waiting group would land, kept while the cluster and configuration are unchanged.
_ghosts: SameInputs[GroupPlacement] = SameInputs()
