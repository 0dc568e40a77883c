"""Which nodes each pool's backend has, and the pods that hold resources on them: the inputs of
``resource list``, ``pool list`` and the submission's node checks (docs/resources.md).

There is one entry per cluster:

* the embedded cluster — the nodes of the cluster description and the pods the database binds
  to them — shared by every backend without a ``kubernetes`` section (and by pools naming a
  backend that is not configured);
* one per Kubernetes backend — the Nodes and the bound, unfinished Pods (everyone's, not only
  corral's) of its watches. A backend that cannot be connected has no nodes (and a warning is
  logged), so its pools show no capacity and its submissions fit no node.

A node of one cluster never counts for a pool of another; a node name present in two clusters
is two nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from corral.backends.port import BackendError, BoundPod, LiveCluster
from corral.backends.registry import Backends, kubernetes_backends
from corral.domain.cluster.description import Cluster
from corral.domain.configs.snapshot import Configs
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.platform.nodes import Node

log = structlog.get_logger("corral.capacity")

#: The ``backend`` of the embedded cluster's entry.
EMBEDDED = ""
#: How long a read waits for a Kubernetes backend's first list of nodes and pods.
SYNC_WAIT_S = 2.0


@dataclass(frozen=True)
class ClusterCapacity:
    """The nodes of one cluster, the pods on them, and the pools (config order) running there."""

    #: ``EMBEDDED``, or the name of the Kubernetes backend.
    backend: str
    nodes: tuple[Node, ...]
    #: Only pods on one of ``nodes``.
    pods: tuple[BoundPod, ...]
    pools: tuple[str, ...]
    #: Where corral puts its pods (a Kubernetes backend's ``k8s_namespace``); None: anywhere.
    namespace: str | None = None
    _by_name: Mapping[str, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {node.name: node for node in self.nodes})

    def node(self, name: str) -> Node | None:
        return self._by_name.get(name)

    def pool_of(self, pod: BoundPod) -> str | None:
        """The pool ``pod`` is a task of: its ``osmo.pool`` label when that names a pool of this
        cluster and the pod is in corral's namespace; None for anyone else's pod."""
        if self.namespace is not None and pod.namespace != self.namespace:
            return None
        pool = pod.labels.get(POOL_LABEL)
        return pool if pool in self.pools else None


class EmbeddedPods(Protocol):
    """The embedded cluster's bound pods (``backends/embedded/bound_pods.py``)."""

    def on(self, nodes: Sequence[Node]) -> tuple[BoundPod, ...]: ...


def cluster_of(clusters: Sequence[ClusterCapacity], pool: str) -> ClusterCapacity | None:
    """The cluster ``pool`` runs on (None: no cluster serves it)."""
    return next((cluster for cluster in clusters if pool in cluster.pools), None)


def read_capacity(
    configs: Configs,
    cluster: Cluster,
    backends: Backends,
    bound_pods: EmbeddedPods,
) -> list[ClusterCapacity]:
    """Every cluster the configuration uses: the embedded one first (left out when every
    configured backend is a Kubernetes one and no pool runs on it), then the Kubernetes
    backends by name. ``bound_pods`` reads the embedded cluster's pods."""
    kubernetes = kubernetes_backends(configs)
    pools: dict[str, list[str]] = {}
    for backend, names in configs.pools_by_backend().items():
        pools.setdefault(backend if backend in kubernetes else EMBEDDED, []).extend(names)
    found = []
    configured = set(configs.backend_names())
    if EMBEDDED in pools or not configured or configured - kubernetes:
        bound = bound_pods.on(cluster.nodes)
        found.append(
            ClusterCapacity(EMBEDDED, cluster.nodes, bound, tuple(pools.get(EMBEDDED, ())))
        )
    for name in sorted(kubernetes):
        connected = _connected(backends, configs, name)
        nodes: tuple[Node, ...] = ()
        running: tuple[BoundPod, ...] = ()
        namespace: str | None = None
        if connected is not None:
            nodes, running, namespace = connected.nodes, connected.bound_pods, connected.namespace
        found.append(ClusterCapacity(name, nodes, running, tuple(pools.get(name, ())), namespace))
    return found


def backend_nodes(
    configs: Configs, cluster: Cluster, backends: Backends, backend: str
) -> tuple[Node, ...]:
    """The nodes the pools of ``backend`` run on (the submission's node checks); the same
    object while they do not change (a sandbox worker keeps it between calls)."""
    if backend not in kubernetes_backends(configs):
        return cluster.nodes
    connected = _connected(backends, configs, backend)
    return () if connected is None else connected.nodes


def _connected(backends: Backends, configs: Configs, name: str) -> LiveCluster | None:
    """What the Kubernetes backend ``name`` sees of its cluster; None (with a warning) when it
    cannot be connected."""
    try:
        found = backends.get(name, configs)
    except BackendError as err:
        log.warning(
            "backend unavailable; its nodes are not counted", backend=name, error=err.message
        )
        return None
    return found.live_cluster(SYNC_WAIT_S)
