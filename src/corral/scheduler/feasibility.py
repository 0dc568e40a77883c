"""Refusing, at submission, a group that could never run (docs/submission.md#what-could-never-run).

A group could never run when

* it needs more GPUs at once than its pool's ``maximum``;
* it is HIGH or NORMAL work and needs more GPUs than its pool's ``guarantee`` (OSMO's check,
  with OSMO's words: such work runs only within the guarantee);
* it could not be placed even on an empty cluster: no domain of a required level is large
  enough, no node takes one of its pods, or its gang does not fit the pool's nodes at all.

Without this, such a submission was accepted and waited out its queue timeout. The check runs
where the plan is made (a sandbox worker), after the objects are rendered, on the pool's
backend's nodes; the empty cluster of a node list is built once and kept, with the shapes of the
groups that fitted it (``shape_of``: a group of a shape that fitted fits again; most
submissions repeat a shape, and placing a group was a sixth of planning it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.domain.configs.models import GpuQuota
from corral.domain.configs.snapshot import Configs
from corral.domain.platform.nodes import Node
from corral.domain.topology.podgroup import pod_group_of
from corral.domain.workflows.plan import PlannedGroup, Submitter, WorkflowPlan
from corral.domain.workflows.planner import plan_workflow
from corral.errors import UserError
from corral.scheduler import ClusterSnapshot, Pending
from corral.scheduler.gang import place_pod_set
from corral.scheduler.podgroup import GroupError, PodSet, read_pod_group, shape_of


@dataclass
class _EmptyCluster:
    """A node list's empty cluster at some topology levels, and the shapes that fitted it."""

    nodes: Sequence[Node]
    snapshot: ClusterSnapshot
    fitted: set[str] = field(default_factory=set)


#: Empty clusters kept, by (the node list's identity, its topology levels).
_EMPTY: dict[tuple[int, tuple[str, ...]], _EmptyCluster] = {}
_EMPTY_KEPT = 8
#: Shapes kept per empty cluster (a pool sees few; the bound only guards memory).
_FITTED_KEPT = 4096


def plan_checked(
    configs: Configs,
    spec: Any,
    submitter: Submitter,
    nodes: Sequence[Node],
    new_id: Callable[[], str],
    *,
    refuse: bool = True,
) -> WorkflowPlan:
    """:func:`plan_workflow`, then :func:`never_runs` (what a sandbox worker runs): a group
    that could never run is refused, or, unless ``refuse``, named in the plan (a dry run
    shows every object and then why)."""
    plan = plan_workflow(configs, spec, submitter, nodes, new_id)
    never = never_runs(configs, plan, nodes)
    if not never:
        return plan
    first = next(iter(never.values()))
    if refuse:
        raise UserError(first)
    return dataclasses.replace(plan, could_never_run=first, never_runs=never)


def never_runs(configs: Configs, plan: WorkflowPlan, nodes: Sequence[Node]) -> dict[str, str]:
    """Each group of ``plan`` that could never run, and why, in the groups' order: the one
    verdict a submission refuses by and a dry run shows per group."""
    found: dict[str, str] = {}
    for group in plan.groups:
        reason = _never_reason(configs, plan, nodes, group)
        if reason is not None:
            found[group.name] = reason
    return found


def _never_reason(
    configs: Configs, plan: WorkflowPlan, nodes: Sequence[Node], group: PlannedGroup
) -> str | None:
    pool_name = plan.submitter.pool
    pool = configs.pool(pool_name)
    quota = pool.resources.gpu or GpuQuota()
    root = _read(group)
    gpus = root.total.gpu
    if quota.maximum != -1 and gpus > quota.maximum:
        return (
            f"Group {group.name} needs {gpus} GPUs at once, more than pool {pool_name}'s "
            f"maximum of {quota.maximum}: it could never run. Use fewer GPUs in the group, "
            "or ask an admin to raise the pool's resources.gpu.maximum."
        )
    if plan.submitter.priority != "LOW" and quota.guarantee != -1 and gpus > quota.guarantee:
        return (
            f"Pool {pool_name} has {quota.guarantee} GPUs guaranteed for NORMAL/HIGH "
            f"priority workflows and group {group.name} requires {gpus} GPUs. Higher gpu "
            "counts must be submitted with LOW priority"
        )
    if not nodes:
        return None  # an unreachable backend: its node checks said so already
    levels = tuple(key.label for key in pool.topology_keys)
    reason = _never_fits(_empty(nodes, levels), root)
    if reason is None:
        return None
    return (
        f"Group {group.name} could never be placed in pool {pool_name}, not even on its "
        f"empty cluster: {reason}. Change the group's size or topology "
        "requirements (corral pool topology shows the domains)."
    )


def _never_fits(empty: _EmptyCluster, root: PodSet) -> str | None:
    """Why ``root`` could never be placed on ``empty``, or None. Only fits are remembered: a
    reason may name the pods of the group it was found for."""
    shape = shape_of(root)
    if shape in empty.fitted:
        return None
    outcome = place_pod_set(empty.snapshot, root, "")
    if isinstance(outcome, Pending):
        return outcome.reason
    if len(empty.fitted) < _FITTED_KEPT:
        empty.fitted.add(shape)
    return None


def _read(group: PlannedGroup) -> PodSet:
    pods = [m for m in group.manifests if m["kind"] == "Pod"]
    pod_group = pod_group_of(group.manifests) or {"spec": {"minMember": len(pods)}}
    try:
        return read_pod_group(pod_group, pods)
    except GroupError as err:
        raise UserError(f"Group {group.name} could never be placed: {err}") from None


def empty_cluster(nodes: Sequence[Node], levels: tuple[str, ...]) -> ClusterSnapshot:
    """The snapshot of ``nodes`` with nothing bound (never changed: placing rolls back), every
    node open: what could never run is judged against the whole configured cluster, so a
    cordoned or failed tray does not refuse work that only waits for it to come back."""
    return _empty(nodes, levels).snapshot


def _empty(nodes: Sequence[Node], levels: tuple[str, ...]) -> _EmptyCluster:
    key = (id(nodes), levels)
    found = _EMPTY.get(key)
    if found is not None and found.nodes is nodes:
        return found
    made = _EmptyCluster(nodes, ClusterSnapshot.from_nodes(nodes, levels, health=False))
    if len(_EMPTY) >= _EMPTY_KEPT:
        _EMPTY.pop(next(iter(_EMPTY)))
    _EMPTY[key] = made
    return made
