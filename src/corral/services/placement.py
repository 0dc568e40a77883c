"""One scheduling pass of the embedded backend: what is already bound, the queues, and the
waiting task groups offered to the scheduler in fair-share order (``scheduler/fair_share.py``).
LOW groups are preemptible in OSMO: they neither count against nor are limited by the quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from corral.domain.configs.snapshot import State, as_configs
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.labels import PRIORITY as PRIORITY_LABEL
from corral.domain.labels import QUEUE as QUEUE_LABEL
from corral.domain.platform.nodes import Node
from corral.domain.topology.kai_objects import queue_manifests
from corral.scheduler import Binding, ClusterSnapshot, Pending, Placement, Queue, QueueUsage
from corral.scheduler.fair_share import fair_share_order
from corral.scheduler.gang import place_group
from corral.scheduler.resources import pod_demand
from corral.store.cluster_objects import ClusterObject

log = structlog.get_logger("corral.placement")

POD_GROUP_KIND = ("scheduling.run.ai/v2alpha2", "PodGroup")


@dataclass(frozen=True)
class WaitingGroup:
    """A task group in SCHEDULING, with what the scheduler needs to place it."""

    key: str  # the group uuid
    levels: tuple[str, ...]  # the pool's topology labels, coarsest first
    priority: str
    age: tuple[Any, ...]  # sorts older groups first
    manifests: Sequence[Mapping[str, Any]]

    @property
    def queue(self) -> str:
        pod_group = _pod_group(self.manifests)
        return str(((pod_group or {}).get("spec") or {}).get("queue") or "")


def pool_queues(state: State) -> list[Queue]:
    """The pool queues of every backend, read from the Queue manifests the Kubernetes backend
    syncs (``domain/topology/kai_objects.py``); the parent queues are unlimited and not needed
    here."""
    backends = {pool.backend for pool in as_configs(state).pools().values()}
    return [
        queue_of(manifest)
        for backend in sorted(backends)
        for manifest in queue_manifests(state, backend)
        if POOL_LABEL in manifest["metadata"]["labels"]
    ]


def queue_of(manifest: Mapping[str, Any]) -> Queue:
    """The scheduler's view of a queue manifest (-1 means none / unlimited)."""
    gpu = manifest["spec"]["resources"]["gpu"]
    limit = int(gpu["limit"])
    return Queue(
        manifest["metadata"]["name"],
        gpu_guarantee=max(int(gpu["quota"]), 0),
        gpu_maximum=None if limit < 0 else limit,
        weight=int(gpu["overQuotaWeight"]),
    )


class SchedulingPass:
    """Snapshots (one per set of topology levels) of the nodes with every bound pod taken,
    kept in step as groups are placed."""

    def __init__(
        self, nodes: Sequence[Node], bound: Iterable[ClusterObject], queues: Iterable[Queue]
    ) -> None:
        self._nodes = nodes
        self._names = {node.name for node in nodes}
        self._snapshots: dict[tuple[str, ...], ClusterSnapshot] = {}
        self._bindings: list[Binding] = []
        self.usage = QueueUsage(queues)
        for pod in bound:
            self._take_existing(pod)

    def _take_existing(self, pod: ClusterObject) -> None:
        if pod.node not in self._names:
            log.warning("bound pod on an unknown node ignored", pod=pod.name, node=pod.node)
            return
        demand = pod_demand(pod.body.get("spec") or {})
        self._bindings.append(Binding(pod.name, pod.node, demand))
        queue = pod.labels.get(QUEUE_LABEL, "")
        if queue in self.usage.used and pod.labels.get(PRIORITY_LABEL, "").upper() != "LOW":
            self.usage.used[queue] += demand.gpu

    def snapshot(self, levels: tuple[str, ...]) -> ClusterSnapshot:
        found = self._snapshots.get(levels)
        if found is None:
            found = ClusterSnapshot.from_nodes(self._nodes, levels)
            for binding in self._bindings:
                try:
                    found.bind([binding])
                except ValueError:  # the cluster description shrank under a running pod
                    log.warning("bound pod does not fit its node", pod=binding.pod)
            self._snapshots[levels] = found
        return found

    def place(self, group: WaitingGroup) -> Placement | Pending:
        """Place ``group``; on success its pods are taken in every snapshot."""
        pods = [m for m in group.manifests if m["kind"] == "Pod"]
        pod_group = _pod_group(group.manifests)
        low = group.priority == "LOW"
        if pod_group is None:
            # The default scheduler has no gangs; placing the pods together still keeps a
            # group from starting half-way, which is what its tasks expect of each other.
            pod_group = {"spec": {"minMember": len(pods)}}
        result = place_group(
            self.snapshot(group.levels), pod_group, pods, None if low else self.usage
        )
        if isinstance(result, Placement):
            self._bindings.extend(result.bindings)
            for snapshot in self._snapshots.values():
                snapshot.bind(result.bindings)
            if not low and result.queue in self.usage.used:
                self.usage.used[result.queue] += result.gpus
        return result

    def order(self, waiting: Iterable[WaitingGroup]) -> list[WaitingGroup]:
        """The order to offer groups in (``scheduler/fair_share.py``); usage as it stands now."""
        return fair_share_order(waiting, self.usage)


def _pod_group(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((m for m in manifests if (m["apiVersion"], m["kind"]) == POD_GROUP_KIND), None)
