"""The scheduler's queues, read from the configuration: one per pool, with its guarantee,
maximum and weight as the Queue manifests the Kubernetes backend syncs say, and how long each
pool's work is protected from preemption."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from corral.domain.configs.snapshot import State, as_configs
from corral.domain.labels import POOL as POOL_LABEL
from corral.domain.topology.kai_objects import queue_manifests
from corral.domain.topology.podgroup import queue_name
from corral.scheduler import Queue


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
    """The scheduler's view of a queue manifest (-1 means unlimited)."""
    gpu = manifest["spec"]["resources"]["gpu"]
    quota, limit = int(gpu["quota"]), int(gpu["limit"])
    return Queue(
        manifest["metadata"]["name"],
        gpu_guarantee=None if quota < 0 else quota,
        gpu_maximum=None if limit < 0 else limit,
        weight=int(gpu["overQuotaWeight"]),
        pool=manifest["metadata"]["labels"].get(POOL_LABEL, ""),
    )


def min_runtimes(state: State) -> dict[str, timedelta]:
    """Per pool queue, how long its work is protected from preemption and reclaim."""
    configs = as_configs(state)
    return {
        queue_name(configs.backend(pool.backend).k8s_namespace, name): timedelta(
            seconds=pool.preemption.min_runtime_seconds()
        )
        for name, pool in configs.pools().items()
        if pool.preemption.min_runtime_seconds()
    }
