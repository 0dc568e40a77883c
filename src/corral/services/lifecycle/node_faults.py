"""Running work on a node that fails or is drained (docs/health.md#running-work): a part of a
tick, before the workflows step.

A group with a pod on a node whose fabric failed, that has been NotReady for longer than
``NOT_READY_GRACE``, or that is being drained, is evicted whole, as the scheduler evicts a
preemption's victims: its pods are unbound and its capacity released in one transaction with
the mark, and its workflow's step stops its tasks and ends or requeues it
(``step.py``). A node fault records the GPU-seconds of work the group lost (``node_faults``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import structlog

from corral.backends.port import BackendError, ClusterBackend
from corral.domain.labels import GROUP_UUID
from corral.domain.platform.node_health import HEALTHY, NodeHealth, drain_of, fault_reason
from corral.domain.workflows.events import NodeFaulted
from corral.domain.workflows.record import Changes, StoredGroup, StoredWorkflow, with_changes
from corral.domain.workflows.statuses import HOLDS_NODES
from corral.scheduler.cache import SchedulerCache
from corral.services.lifecycle.tick_index import WorkingSetIndexer
from corral.services.lifecycle.unit import TickWrites
from corral.services.lifecycle.working_set import WorkingSet

log = structlog.get_logger("corral.lifecycle")


@dataclass(frozen=True)
class NodeStop:
    """Group ``group`` must stop because of node ``node``: its ``fault``, or a drain."""

    node: str
    fault: str | None
    drained_by: str = ""
    grace_s: float | None = None
    group: str = ""


def stops_due(cache: SchedulerCache, now: datetime) -> list[NodeStop]:
    """The bound groups that must stop now, each once (its first bad node by name)."""
    stops: dict[str, NodeStop] = {}
    for name in sorted(cache.unhealthy):
        groups = cache.groups_on(name)
        if not groups:
            continue
        stop = _stop_for(name, cache.unhealthy[name], now)
        if stop is None:
            continue
        for group in groups:
            found = stops.get(group)
            if found is None or (found.fault is None and stop.fault is not None):
                stops[group] = dataclasses.replace(stop, group=group)  # a fault wins: no notice
    return list(stops.values())


def _noticed_groups(working: WorkingSet) -> Iterator[tuple[StoredWorkflow, StoredGroup]]:
    """The groups under notice whose tasks still run; a group no longer so is forgotten."""
    for group_uuid, workflow_id in list(working.noticed.items()):
        workflow = working.workflows.get(workflow_id)
        group = (
            next((g for g in workflow.groups if g.uuid == group_uuid), None) if workflow else None
        )
        if (
            workflow is None
            or group is None
            or not group.evict
            or group.fault
            or group.status not in HOLDS_NODES
        ):
            working.noticed.pop(group_uuid, None)
            continue
        yield workflow, group


def faults_under_notice(working: WorkingSet, now: datetime) -> list[NodeStop]:
    """Groups under notice (their pods unbound, docs/checkpoints.md#the-notice) whose tasks
    still run on a node that failed since: they stop at once."""
    stops: list[NodeStop] = []
    for _, group in _noticed_groups(working):
        for node in sorted({t.node for t in group.tasks if t.node}):
            health = working.scheduler_cache.unhealthy.get(node)
            fault = fault_reason(health, now) if health is not None else None
            if fault is not None:
                stops.append(NodeStop(node, fault, group=group.uuid))
                break
    return stops


def nodes_under_notice(working: WorkingSet, index: WorkingSetIndexer) -> frozenset[tuple[str, str]]:
    """(backend, node) where a task of a group under notice still runs, on the clusters corral
    schedules: a task bound there (its preemptor's) starts once that task stopped. A cluster's
    own scheduler binds a pod only to room that is free."""
    return frozenset(
        (workflow.backend, task.node)
        for workflow, group in _noticed_groups(working)
        if not _self_placed(index, workflow.backend)
        for task in group.tasks
        if task.node and task.status in HOLDS_NODES
    )


def _self_placed(index: WorkingSetIndexer, backend: str) -> bool:
    """Whether the cluster's own scheduler places ``backend``'s pods (one that cannot be
    reached is left to its own step)."""
    try:
        return index.backend(backend)[0].schedules_itself
    except (BackendError, LookupError):
        return True


def _stop_for(node: str, health: NodeHealth, now: datetime) -> NodeStop | None:
    """Why what runs on the node must stop now (for no group yet), or None."""
    fault = fault_reason(health, now)
    if fault is not None:
        return NodeStop(node, fault)
    drain = drain_of(health)
    if drain is None:
        return None
    by = f" by {drain.by}" if drain.by else ""
    why = f": {drain.reason!r}" if drain.reason else ""
    return NodeStop(node, None, f"the drain of node {node}{by}{why}", drain.drain_grace_s)


@dataclass
class Stopped:
    """What stopping work recorded, for the working set to follow once it is committed: the
    groups whose pods were unbound, and the workflows that step in this tick."""

    released: list[str] = field(default_factory=list)
    workflows: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.released or self.workflows)

    def __iadd__(self, other: Stopped) -> Stopped:
        self.released.extend(other.released)
        self.workflows |= other.workflows
        return self

    def follow(self, working: WorkingSet, committed: Changes) -> None:
        """The working set as the commit of ``committed`` left the database."""
        for group in self.released:
            working.scheduler_cache.release(group)
            working.bound.pop(group, None)
        for workflow_id in self.workflows:
            working.keep(with_changes(working.workflows[workflow_id], committed))
            working.dirty.add(workflow_id)


def stop_work_on_bad_nodes(
    working: WorkingSet, index: WorkingSetIndexer, writes: TickWrites, now: datetime
) -> Stopped:
    """Evict the groups on failed or drained nodes: marked and unbound in ``writes`` (their
    capacity released once that is committed); their workflows step in this tick."""
    stops = [
        stop
        for stop in stops_due(working.scheduler_cache, now)
        if stop.group in working.bound  # a group of a task group (not a foreign pod)
    ]
    noticed = faults_under_notice(working, now)
    if not stops and not noticed:
        return Stopped()
    owners = {stop.group: working.workflows[working.bound[stop.group]] for stop in stops}
    owners.update({stop.group: working.workflows[working.noticed[stop.group]] for stop in noticed})
    gpus = {stop.group: working.scheduler_cache.gpus_of(stop.group) for stop in stops}
    changes = Changes()
    mark_stops([*stops, *noticed], owners, partial(_gpus, gpus), now, changes)
    writes.record(changes)
    groups = [stop.group for stop in stops]
    index.unbind(groups)  # before the commit: working.bound still names their workflows
    return Stopped(groups, {owner.workflow_id for owner in owners.values()})


def stop_work_on_kubernetes(
    working: WorkingSet, clusters: Iterable[ClusterBackend], writes: TickWrites, now: datetime
) -> Stopped:
    """The same for the groups a cluster's own scheduler placed, by the health of their tasks'
    Nodes (``clusters``: the connected Kubernetes backends, read through ``live_cluster``).
    Their tasks end (a cluster's scheduler places again what corral resubmits,
    docs/kubernetes.md#not-yet)."""
    stopped = Stopped()
    for cluster in clusters:
        live = cluster.live_cluster(0.0)
        if live is None:
            continue
        bad = {
            node.name: stop
            for node in live.nodes
            if node.health != HEALTHY and (stop := _stop_for(node.name, node.health, now))
        }
        if not bad:
            continue
        stops, owners = _groups_on(working, cluster.name, bad)
        if not stops:
            continue
        gpus: dict[str, int] = {}
        for pod in live.bound_pods:
            group = pod.labels.get(GROUP_UUID)
            if group in owners:
                gpus[group] = gpus.get(group, 0) + pod.demand.gpu
        changes = Changes()
        mark_stops(stops, owners, partial(_gpus, gpus), now, changes)
        writes.record(changes)
        stopped.workflows.update(w.workflow_id for w in owners.values())
    return stopped


def _gpus(held: Mapping[str, int], group: str) -> int:
    return held.get(group, 0)


def _groups_on(
    working: WorkingSet, backend: str, bad: Mapping[str, NodeStop]
) -> tuple[list[NodeStop], dict[str, StoredWorkflow]]:
    """The running groups of ``backend`` with a task on a ``bad`` node (each stop's node is
    the group's first bad one, by task order)."""
    stops: list[NodeStop] = []
    owners: dict[str, StoredWorkflow] = {}
    for workflow in working.workflows.values():
        if workflow.backend != backend:
            continue
        for group in workflow.groups:
            if group.status not in HOLDS_NODES or group.evict:
                continue
            node = next((t.node for t in group.tasks if t.node in bad), None)
            if node is not None:
                stops.append(dataclasses.replace(bad[node], group=group.uuid))
                owners[group.uuid] = workflow
    return stops, owners


def mark_stops(
    stops: list[NodeStop],
    owners: Mapping[str, StoredWorkflow],
    gpus_of: Callable[[str], int],
    now: datetime,
    changes: Changes,
) -> None:
    """Record each stop in ``changes`` (``owners``: the workflow of each group)."""
    for stop in stops:
        workflow = owners[stop.group]
        if stop.fault is None:
            if changes.groups.get(stop.group, {}).get("fault"):
                continue  # a fault under the same group stops it at once: no notice
            changes.group(
                stop.group,
                evict=True,
                fault=None,
                preempted_by=stop.drained_by,
                stop_grace_s=stop.grace_s,
            )
            log.info("group drained", workflow_id=workflow.workflow_id, node=stop.node)
            continue
        at = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        fault = f"node {stop.node} failed at {at}: {stop.fault}"
        changes.group(stop.group, evict=True, fault=fault, preempted_by=None, stop_grace_s=None)
        gpus = gpus_of(stop.group)
        started = next(g.started_at for g in workflow.groups if g.uuid == stop.group)
        lost = gpus * max((now - started).total_seconds(), 0.0) if started else 0.0
        changes.node_faults.append(
            NodeFaulted(
                at=now,
                pool=workflow.pool,
                workflow_id=workflow.workflow_id,
                group_uuid=stop.group,
                node=stop.node,
                reason=stop.fault,
                gpus=gpus,
                gpu_seconds=lost,
            )
        )
        log.warning(
            "group stopped by a node fault",
            workflow_id=workflow.workflow_id,
            node=stop.node,
            fault=stop.fault,
            gpu_seconds_lost=round(lost, 1),
        )
