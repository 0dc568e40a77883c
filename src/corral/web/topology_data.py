"""What the topology page draws, computed from the live cluster: the picture of a pool, who
owns each node (by name, or by an opaque tag for a caller who may not read the pool's
workflows), and the ghost of a waiting group. Pictures and ghosts are kept while the
configuration, the nodes and the bound pods are the same objects (services/memo.py): a page of
5,000 nodes is drawn once per change of the cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.labels import SUBMITTED_BY, WORKFLOW_ID
from corral.domain.workflows.record import StoredWorkflow
from corral.domain.workflows.statuses import ALIVE, IN_QUEUE
from corral.services.capacity import ClusterCapacity
from corral.services.capacity_model import pool_capacity
from corral.services.memo import SameInputs
from corral.services.placement_now import GroupPlacement, OfferedGroup, groups_placed_now
from corral.services.pool_usage import gpus_per_node, layout_of, node_gpus
from corral.services.runtime import utc_now
from corral.services.workflow_names import UNKNOWN, Owner, WorkflowNamer
from corral.web.topology_view import Level, TopologyPicture, picture

#: What a node's pod of no corral workflow is called.
NOT_CORRALS = "(not corral's)"


def pool_picture(
    state: Any,
    cluster: ClusterCapacity | None,
    pool: str,
    levels: tuple[Level, ...],
    within: tuple[str, str] | None,
) -> TopologyPicture:
    """The pool's picture, each domain with what fits there now for NORMAL work (the
    capacity model's figures: ``services/capacity_model.py``)."""
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
    serving = layout.nodes_of_pool(pool)
    nodes = [node for node in cluster.nodes if node.name in serving]
    owners: dict[str, set[str]] = {}
    for pod in cluster.pods:
        owners.setdefault(pod.node, set()).add(pod.labels.get(WORKFLOW_ID, NOT_CORRALS))
    return picture(
        nodes,
        levels,
        node_gpus(cluster.nodes),
        gpus_per_node(cluster.pods),
        {node: sorted(found) for node, found in owners.items()},
        within,
        pool_capacity(state, cluster, pool),
    )


def owner_names(name: WorkflowNamer, cluster: ClusterCapacity | None) -> Callable[[str], str]:
    """How the page names a node's workflow: as ``services/workflow_names.py`` says, by the
    workflow's own pool and submitter (read from its pods' labels). A node may serve several
    pools: that the caller may read the page's pool says nothing of the others'."""
    owners: dict[str, Owner] = {}
    for pod in cluster.pods if cluster is not None else ():
        workflow_id = pod.labels.get(WORKFLOW_ID)
        if workflow_id is not None and workflow_id not in owners:
            owners[workflow_id] = Owner(
                pod.labels.get(POOL_LABEL, ""), pod.labels.get(SUBMITTED_BY, "")
            )

    def shown(workflow_id: str) -> str:
        if workflow_id == NOT_CORRALS:
            return workflow_id
        return name(workflow_id, owners.get(workflow_id, UNKNOWN))

    return shown


def ghost_of(state: Any, workflow: StoredWorkflow, cluster: ClusterCapacity) -> GroupPlacement:
    """Where the workflow's first group that waits to start would land now, or why not."""
    waiting = [
        g
        for g in workflow.groups
        if g.status in IN_QUEUE and all(task.node is None for task in g.tasks)
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
