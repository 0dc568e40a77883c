"""The scheduler's queues, read from the configuration: one per pool, with its guarantee,
maximum and weight, the same as the Queue manifests the Kubernetes backend syncs say (a test
holds them equal), and how long each pool's work is protected from preemption."""

from __future__ import annotations

from datetime import timedelta

from corral.domain.configs.models import GpuQuota, Pool
from corral.domain.configs.snapshot import State, as_configs
from corral.domain.topology.podgroup import queue_name
from corral.scheduler import Queue


def pool_queues(state: State) -> list[Queue]:
    """The pool queue of every pool, by backend and then pool name, as the Kubernetes backend
    names them; -1 (unlimited) is None. The parent queues are unlimited and not needed here."""
    configs = as_configs(state)
    pools = configs.pools()
    return [
        pool_queue(configs.backend(pool.backend).k8s_namespace, name, pool)
        for name, pool in sorted(pools.items(), key=lambda item: (item[1].backend, item[0]))
    ]


def pool_queue(namespace: str, name: str, pool: Pool) -> Queue:
    gpu = pool.resources.gpu or GpuQuota()
    return Queue(
        queue_name(namespace, name),
        gpu_guarantee=None if gpu.guarantee < 0 else gpu.guarantee,
        gpu_maximum=None if gpu.maximum < 0 else gpu.maximum,
        weight=gpu.weight,
        pool=name,
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
