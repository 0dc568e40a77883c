"""The cluster-scoped KAI objects corral keeps per backend
(docs/osmo-reference.md#kai-objects-per-pool): a parent
``Queue`` per namespace, one ``Queue`` per pool under it, and a ``Topology`` per pool with
``topology_keys``.

The embedded scheduler reads its queues from the same pool configs (``scheduler/queues.py``,
held equal to these manifests by a test), so what the simulated backend enforces is what KAI
gets on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from corral.domain.configs.models import GpuQuota, Pool
from corral.domain.configs.snapshot import Configs
from corral.domain.labels import NAMESPACE as NAMESPACE_LABEL
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.topology.podgroup import priority_class_name, queue_name, topology_crd_name

QUEUE_KIND = ("scheduling.run.ai/v2", "Queue")
PRIORITY_CLASS_KIND = ("scheduling.k8s.io/v1", "PriorityClass")
#: Every PodGroup names ``osmo-<priority>``. KAI treats a priority value below 100 as
#: preemptible (docs/osmo-reference.md#kais-topology-and-gang-semantics): LOW is, NORMAL and HIGH
#: are not (KAI's own classes train, build and inference use 50, 100 and 125).
PRIORITY_VALUES = {"HIGH": 125, "NORMAL": 100, "LOW": 50}
TOPOLOGY_KIND = ("kai.scheduler/v1alpha1", "Topology")
_UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}


def backend_namespace(configs: Configs, backend: str) -> str:
    return configs.backend(backend).k8s_namespace


def parent_queue_name(namespace: str) -> str:
    return f"osmo-default-{namespace}"


def pools_of(configs: Configs, backend: str) -> dict[str, Pool]:
    pools = configs.pools()
    return {name: pool for name, pool in pools.items() if pool.backend == backend}


def queue_manifests(configs: Configs, backend: str) -> list[dict[str, Any]]:
    """The parent queue, then one queue per pool of ``backend`` with its GPU quota."""
    namespace = backend_namespace(configs, backend)
    parent = parent_queue_name(namespace)
    queues = [_queue(parent, namespace, {"gpu": _UNLIMITED}, pool=None, parent=None)]
    for name, pool in sorted(pools_of(configs, backend).items()):
        gpu = pool.resources.gpu or GpuQuota()
        quota = {"quota": gpu.guarantee, "limit": gpu.maximum, "overQuotaWeight": gpu.weight}
        queue = _queue(
            queue_name(namespace, name), namespace, {"gpu": quota}, pool=name, parent=parent
        )
        minimum = pool.preemption.min_runtime_seconds()
        if minimum:
            # KAI protects young work from preemption and reclaim as the embedded scheduler does
            queue["spec"]["preemptMinRuntime"] = f"{minimum}s"
            queue["spec"]["reclaimMinRuntime"] = f"{minimum}s"
        queues.append(queue)
    return queues


def _queue(
    name: str,
    namespace: str,
    resources: Mapping[str, Mapping[str, int]],
    *,
    pool: str | None,
    parent: str | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resources": {
            "gpu": dict(resources["gpu"]),
            "cpu": dict(_UNLIMITED),
            "memory": dict(_UNLIMITED),
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": QUEUE_KIND[0],
        "kind": QUEUE_KIND[1],
        "metadata": {"name": name, "labels": _labels(namespace, pool)},
        "spec": spec,
    }


def topology_manifests(configs: Configs, backend: str) -> list[dict[str, Any]]:
    """One Topology per pool of ``backend`` with topology keys, levels in pool order."""
    namespace = backend_namespace(configs, backend)
    found = []
    for name, pool in sorted(pools_of(configs, backend).items()):
        if not pool.topology_keys:
            continue
        found.append(
            {
                "apiVersion": TOPOLOGY_KIND[0],
                "kind": TOPOLOGY_KIND[1],
                "metadata": {
                    "name": topology_crd_name(namespace, name),
                    "labels": _labels(namespace, name),
                },
                "spec": {"levels": [{"nodeLabel": key.label} for key in pool.topology_keys]},
            }
        )
    return found


def _labels(namespace: str, pool: str | None) -> dict[str, str]:
    labels = {NAMESPACE_LABEL: namespace}
    if pool is not None:
        labels[POOL_LABEL] = pool
    return labels


def priority_class_manifests() -> list[dict[str, Any]]:
    """The PriorityClasses every workflow's PodGroup needs; ``deploy/kubernetes`` holds them."""
    return [
        {
            "apiVersion": PRIORITY_CLASS_KIND[0],
            "kind": PRIORITY_CLASS_KIND[1],
            "metadata": {"name": priority_class_name(priority)},
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": f"corral workflows of priority {priority}"
            + (" (preemptible)" if value < 100 else ""),
        }
        for priority, value in PRIORITY_VALUES.items()
    ]
