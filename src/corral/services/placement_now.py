"""Where a workflow's groups would be placed now, for ``--dry-run``
(docs/submission.md#dry-run-where-it-would-run-now).

The cluster's live occupancy — its nodes and the pods bound to them, of every pool — is read
into the same scheduling state the controller keeps (``scheduler/cache.py``), and the
workflow's groups are offered to it in order, as one pass would: each is placed (possibly
evicting lower-priority work, which is named), or gets the reason the controller would write,
which ``corral workflow explain`` shows. Nothing is bound or evicted for real. Groups are
offered as if all were ready now (a group that waits for an upstream one will be offered only
once that one ends, on the occupancy of that time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.domain.configs.snapshot import Configs
from corral.domain.labels import GROUP_UUID, WORKFLOW_ID
from corral.domain.topology.fabric import fabric_rule
from corral.domain.workflows.plan import WorkflowPlan
from corral.scheduler.cache import SchedulerCache
from corral.scheduler.cycle import place_waiting
from corral.scheduler.queues import min_runtimes, pool_queues
from corral.scheduler.records import BoundPodOnNode
from corral.services.capacity import ClusterCapacity


@dataclass(frozen=True)
class Eviction:
    """Running work a group would evict."""

    workflow_id: str
    gpus: int
    reclaimed: bool


@dataclass(frozen=True)
class GroupPlacement:
    """Where one group would go now (``nodes``: pod -> node), or why not (``reason``)."""

    group: str
    nodes: dict[str, str] = field(default_factory=dict)
    domains: dict[str, str] = field(default_factory=dict)
    evicts: tuple[Eviction, ...] = ()
    reason: str | None = None
    #: The reason is why it could never run (``scheduler/feasibility.never_runs``): the
    #: verdict a submission is refused with, not a wait.
    never: bool = False

    @property
    def verdict(self) -> str:
        """``runs`` now, ``waits``, or could ``never`` run."""
        return "never" if self.never else "waits" if self.reason is not None else "runs"


@dataclass(frozen=True)
class OfferedGroup:
    """A group to place: its uuid, name and Kubernetes objects."""

    uuid: str
    name: str
    manifests: Sequence[Mapping[str, Any]]


def placements_now(
    configs: Configs, plan: WorkflowPlan, cluster: ClusterCapacity, now: datetime
) -> list[GroupPlacement]:
    """One entry per group of ``plan``, in order (see the module docstring): a group that
    could never run says so, with the reason a submission would be refused with, and is not
    offered to the scheduler."""
    never = plan.never_runs
    groups = [
        OfferedGroup(group.uuid, group.name, group.manifests)
        for group in plan.groups
        if group.name not in never
    ]
    placed = groups_placed_now(
        configs, plan.submitter.pool, plan.submitter.priority, groups, cluster, now
    )
    by_name = {found.group: found for found in placed}
    return [
        GroupPlacement(group.name, reason=never[group.name], never=True)
        if group.name in never
        else by_name[group.name]
        for group in plan.groups
    ]


def groups_placed_now(
    configs: Configs,
    pool_name: str,
    priority: str,
    groups: Sequence[OfferedGroup],
    cluster: ClusterCapacity,
    now: datetime,
) -> list[GroupPlacement]:
    """Where ``groups`` of a workflow of ``pool_name`` would go now: a dry run's placements,
    and the dashboard's ghost of a waiting group (one entry per group, in order)."""
    pool = configs.pool(pool_name)
    levels = tuple(key.label for key in pool.topology_keys)
    bound = [
        BoundPodOnNode(
            pod.name, pod.node, pod.labels.get(GROUP_UUID), pod.labels, pod.spec, pod.demand
        )
        for pod in cluster.pods
    ]
    owners = {
        pod.labels[GROUP_UUID]: pod.labels.get(WORKFLOW_ID, "?")
        for pod in cluster.pods
        if GROUP_UUID in pod.labels
    }
    placements = SchedulerCache(
        cluster.nodes, pool_queues(configs), bound, min_runtime=min_runtimes(configs)
    )
    for position, group in enumerate(groups):
        placements.add(
            group.uuid,
            list(group.manifests),
            levels=levels,
            priority=priority,
            age=(position,),
            fabric=fabric_rule(pool),
        )
    result = place_waiting(placements, now)
    placed = {found.group.key: found.placement for found in result.placed}
    evicted: dict[str, list[Eviction]] = {}
    for eviction in result.evicted:
        evicted.setdefault(eviction.by, []).append(
            Eviction(owners.get(eviction.group, "?"), eviction.gpus, eviction.reclaimed)
        )
    found = []
    for group in groups:
        placement = placed.get(group.uuid)
        if placement is not None:
            found.append(
                GroupPlacement(
                    group.name,
                    placement.nodes(),
                    dict(placement.domains),
                    tuple(evicted.get(group.uuid, ())),
                )
            )
            continue
        waiting = placements.waiting.get(group.uuid)
        reason = waiting.shape.reason if waiting is not None else None
        found.append(GroupPlacement(group.name, reason=reason or "not placed"))
    return found
