"""Changing a node's health on a running server: cordon, drain, uncordon, fail, heal
(docs/health.md#changing-a-nodes-health).

Each change is audited (``store/node_changes.py``) and takes effect at the controller's next
tick, on every server sharing the database. Only the embedded cluster's nodes can be changed
for now; ``fail`` and ``heal`` only ever exist on a simulated cluster.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Protocol, runtime_checkable

from corral.backends.port import BackendError
from corral.backends.registry import kubernetes_backends
from corral.domain.cluster.description import Cluster
from corral.domain.platform.node_health import Cordon, Fabric, NodeHealth
from corral.domain.platform.nodes import Node
from corral.domain.views.resource_listing import pool_layout
from corral.errors import ForbiddenError, NotFoundError, UnavailableError, UserError
from corral.services.config_service import ConfigService
from corral.store.node_changes import NodeChange, NodeChangeStore

#: The backend name node changes of the embedded cluster are recorded under.
EMBEDDED = "embedded"
#: Longest reason kept with a change.
MAX_REASON = 1024
#: How often another server's changes are looked for (this server's own are seen at once): a
#: controller tick costs no query for them in between.
POLL_SECONDS = 1.0


#: A drain's grace period when none is given: Kubernetes' default
#: ``terminationGracePeriodSeconds``.
DEFAULT_DRAIN_GRACE_S = 30.0
#: Longest grace period a drain may give.
MAX_DRAIN_GRACE_S = 24 * 3600.0


class NodeAction(Enum):
    CORDON = "cordon"
    UNCORDON = "uncordon"
    DRAIN = "drain"
    FAIL = "fail"
    HEAL = "heal"


@runtime_checkable
class KubernetesNodes(Protocol):
    """A Kubernetes backend's Nodes, as a node change needs them."""

    name: str

    def nodes(self) -> list[Node]: ...

    def set_cordon(self, node: str, cordon: Cordon | None) -> None: ...


@dataclass(frozen=True)
class NodeAdmin:
    """Who changes a node, and how to ask whether they may (ForbiddenError if not)."""

    username: str
    require: Callable[[str, str], None]


class NodeService:
    def __init__(
        self,
        changes: NodeChangeStore,
        configs: ConfigService,
        cluster: Cluster,
        clock: Callable[[], datetime],
        *,
        kubernetes: Callable[[], Sequence[KubernetesNodes]] = tuple,
    ) -> None:
        self._changes = changes
        self._kubernetes = kubernetes
        self._configs = configs
        self._described = cluster
        #: What ``fail`` and ``heal`` stamp as the time the Ready condition changed.
        self.clock = clock
        self._lock = threading.Lock()
        self._kept: tuple[int, Cluster] = (0, cluster)
        self._monotonic = time.monotonic
        self._polled_at: float | None = None

    def cluster(self) -> Cluster:
        """The embedded cluster, each node with its health now (its description's, or the
        latest change made on a running server). The same value until a change is made."""
        now = self._monotonic()
        with self._lock:
            polled = self._polled_at
            if polled is not None and now - polled < POLL_SECONDS:
                return self._kept[1]
        marker = self._changes.marker()
        with self._lock:
            self._polled_at = now
            if self._kept[0] == marker:
                return self._kept[1]
        current = self._changes.current(EMBEDDED)
        cluster = Cluster(
            tuple(
                dataclasses.replace(node, health=current[node.name])
                if node.name in current
                else node
                for node in self._described.nodes
            )
        )
        with self._lock:
            self._kept = (marker, cluster)
        return cluster

    def nodes(self) -> tuple[Node, ...]:
        return self.cluster().nodes

    def change(
        self,
        admin: NodeAdmin,
        name: str,
        action: NodeAction,
        reason: str = "",
        *,
        fabric_only: bool = False,
        grace_s: float = DEFAULT_DRAIN_GRACE_S,
    ) -> NodeChange:
        """Apply ``action`` to node ``name`` (``fabric_only``: ``fail`` cuts the tray off its
        fabric, and it stays Ready; ``grace_s``: a drain's grace period), audited."""
        if len(reason) > MAX_REASON:
            raise UserError(f"at most {MAX_REASON} characters", path=("reason",))
        if not 0 <= grace_s <= MAX_DRAIN_GRACE_S:
            raise UserError(
                f"a drain's grace period is 0 to {MAX_DRAIN_GRACE_S:.0f} seconds",
                path=("grace_seconds",),
            )
        with self._lock:
            self._polled_at = None  # "before" is the health now, whichever server changed it
        backend, node = self._find(name)
        self._check_may_change(admin, node, backend)
        asked = _Change(action, admin.username, reason, fabric_only, grace_s)
        after = _changed(node.health, asked, self.clock())
        if backend is not None:
            self._change_kubernetes(backend, node, action, after)
        change = self._changes.record(
            EMBEDDED if backend is None else backend.name,
            name,
            action.value,
            by=admin.username,
            reason=reason,
            before=node.health,
            after=after,
        )
        with self._lock:
            self._polled_at = None  # this server sees its own change at once
        return change

    def history(self, name: str) -> list[NodeChange]:
        """The node's changes, newest first."""
        backend, node = self._find(name)
        return self._changes.history(EMBEDDED if backend is None else backend.name, node.name)

    def _find(self, name: str) -> tuple[KubernetesNodes | None, Node]:
        """The node, and its Kubernetes backend (None: the embedded cluster's). A real
        cluster's node comes first: the embedded cluster may describe one of the same name."""
        for backend in self._kubernetes():
            found = next((n for n in backend.nodes() if n.name == name), None)
            if found is not None:
                return backend, found
        node = self.cluster().node(name)
        if node is not None:
            return None, node
        raise NotFoundError(
            f"Node {name} is not a node of the embedded cluster or of a Kubernetes backend; "
            "`corral resource list` lists the nodes."
        )

    @staticmethod
    def _change_kubernetes(
        backend: KubernetesNodes, node: Node, action: NodeAction, after: NodeHealth
    ) -> None:
        """Cordon, drain or uncordon the real Node; a real tray's health is the cluster's."""
        if action in (NodeAction.FAIL, NodeAction.HEAL):
            raise UserError(
                f"Node {node.name} is a node of Kubernetes backend {backend.name}: {action.value} "
                "only changes a simulated tray (its health is what the cluster says). Use "
                "cordon, drain or uncordon."
            )
        try:
            backend.set_cordon(node.name, after.cordon)
        except BackendError as err:
            raise UnavailableError(err.message) from None

    def _check_may_change(
        self, admin: NodeAdmin, node: Node, backend: KubernetesNodes | None
    ) -> None:
        """``node:Update`` on one of the pools the node serves (on ``node/<name>`` for a node
        that serves none: only a policy on every resource grants it). Never on ``pool/*``: a
        request names one resource (``domain/access/policies.py``)."""
        state = self._configs.state()
        kubernetes = kubernetes_backends(state)
        pools = [
            name
            for name, pool in state.pools().items()
            if (pool.backend == backend.name if backend else pool.backend not in kubernetes)
        ]
        served = pool_layout(state, [node], pools).pools_of(node.name)
        for resource in [f"pool/{pool}" for pool in served] or [f"node/{node.name}"]:
            try:
                admin.require("node:Update", resource)
            except ForbiddenError:
                continue
            return
        raise ForbiddenError(
            f"Node {node.name} serves no pool you may administer (node:Update on "
            f"{_named(served)}); ask an admin."
        )


@dataclass(frozen=True)
class _Change:
    action: NodeAction
    by: str
    reason: str
    fabric_only: bool
    grace_s: float


def _changed(health: NodeHealth, change: _Change, now: datetime) -> NodeHealth:
    action, by, reason = change.action, change.by, change.reason
    if action is NodeAction.CORDON:
        return dataclasses.replace(health, cordon=Cordon(by, reason))
    if action is NodeAction.DRAIN:
        return dataclasses.replace(health, cordon=Cordon(by, reason, change.grace_s))
    if action is NodeAction.UNCORDON:
        return dataclasses.replace(health, cordon=None)
    if action is NodeAction.FAIL and change.fabric_only:
        return dataclasses.replace(health, fabric=Fabric.FAILED, fabric_reason=reason)
    if action is NodeAction.FAIL:
        return dataclasses.replace(
            health, ready=False, ready_since=now, not_ready_reason=reason or "failed"
        )
    return dataclasses.replace(
        health,
        ready=True,
        ready_since=now if not health.ready else health.ready_since,
        not_ready_reason="",
        fabric=Fabric.HEALTHY,
        fabric_reason="",
    )


def _named(pools: Sequence[str]) -> str:
    return ", ".join(f"pool/{pool}" for pool in pools) if pools else "no pool: it serves none"
