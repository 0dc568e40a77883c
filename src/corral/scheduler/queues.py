"""Queues: one per pool, with a GPU ``guarantee``, ``maximum`` and ``weight`` (KAI's Queue
``quota``, ``limit`` and ``overQuotaWeight``; docs/scheduler.md#queues-priorities-and-preemption).

* ``maximum`` caps every GPU the queue's work uses, LOW included: a group that would push the
  queue over it stays pending.
* ``guarantee`` (the *deserved* quota) caps the queue's non-preemptible work (HIGH and NORMAL):
  KAI runs such work only within its queue's quota, so that it never has to be reclaimed.
  Preemptible (LOW) work may use idle GPUs above the guarantee: that is *borrowing*, and what
  a queue borrows may be reclaimed by a queue below its own guarantee.
* ``weight`` divides what is above the guarantees: queues are offered GPUs in the order of
  what they use above their guarantee per unit of weight (``fair_share.py``).

``None`` as a guarantee means no limit on non-preemptible work (KAI's quota -1, OSMO's default);
as a maximum, no limit at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from corral.domain.configs.models import GpuQuota, Pool
from corral.domain.configs.snapshot import Configs
from corral.domain.topology.podgroup import queue_name


@dataclass(frozen=True)
class Queue:
    name: str
    gpu_guarantee: int | None = None  # None: unlimited (KAI's quota -1)
    gpu_maximum: int | None = None  # None: no limit
    weight: int = 1
    #: The pool whose queue this is ("": none), for messages users read.
    pool: str = ""

    @property
    def label(self) -> str:
        return f"pool {self.pool}" if self.pool else f"queue {self.name}"


class QueueUsage:
    """GPUs in use per queue, charged when a placement is bound and refunded on release:
    ``used`` counts every GPU, ``deserved`` those of non-preemptible work."""

    def __init__(self, queues: Iterable[Queue]) -> None:
        self.queues = {queue.name: queue for queue in queues}
        self.used: dict[str, int] = dict.fromkeys(self.queues, 0)
        self.deserved: dict[str, int] = dict.fromkeys(self.queues, 0)

    def refusal(
        self, queue: str, gpus: int, *, preemptible: bool = False, freed: int = 0
    ) -> str | None:
        """Why ``gpus`` more GPUs may not be used by ``queue`` now (after ``freed`` of its GPUs
        are given back), or None."""
        found = self.queues.get(queue)
        if found is None:
            return f"queue {queue!r} does not exist; the pool's queue must be configured first"
        in_use = self.used[queue] - freed
        limit = found.gpu_maximum
        if limit is not None and in_use + gpus > limit:
            return (
                f"{found.label} would use {in_use + gpus} GPUs, over its maximum of {limit} "
                f"({in_use} in use)"
            )
        guarantee = found.gpu_guarantee
        deserved = self.deserved[queue]
        if not preemptible and guarantee is not None and deserved + gpus > guarantee:
            return (
                f"{deserved + gpus} GPUs of HIGH and NORMAL work would be over "
                f"{found.label}'s guarantee of {guarantee} ({deserved} in use); "
                + _how_to_borrow(limit)
            )
        return None

    def borrowed(self, queue: str) -> int:
        """GPUs ``queue`` uses above its guarantee (only preemptible work can be there)."""
        found = self.queues.get(queue)
        if found is None or found.gpu_guarantee is None:
            return 0
        return max(0, self.used[queue] - found.gpu_guarantee)

    def charge(self, queue: str, gpus: int, *, preemptible: bool = False) -> None:
        """Count a placement against ``queue``; ValueError if its limits refuse it."""
        reason = self.refusal(queue, gpus, preemptible=preemptible)
        if reason:
            raise ValueError(reason)
        self.count(queue, gpus, preemptible=preemptible)

    def count(self, queue: str, gpus: int, *, preemptible: bool = False) -> None:
        """Count GPUs already in use (found bound, whatever the limits say now)."""
        self.used[queue] += gpus
        if not preemptible:
            self.deserved[queue] += gpus

    def counts(self, queue: str) -> tuple[int, int] | None:
        """The GPUs ``queue`` uses and those it deserves (None: no such queue), for
        :meth:`restore`."""
        if queue not in self.used:
            return None
        return self.used[queue], self.deserved[queue]

    def restore(self, queue: str, counts: tuple[int, int]) -> None:
        """Put back the counts :meth:`counts` answered (a tried eviction undone)."""
        self.used[queue], self.deserved[queue] = counts

    def refund(self, queue: str, gpus: int, *, preemptible: bool = False) -> None:
        """Give back what :meth:`charge` or :meth:`count` took (never below zero: a queue's
        count may have been read under other limits)."""
        self.used[queue] -= min(gpus, self.used[queue])
        if not preemptible:
            self.deserved[queue] -= min(gpus, self.deserved[queue])


def _how_to_borrow(maximum: int | None) -> str:
    """What a group over its queue's guarantee can do instead of waiting."""
    limit = (
        "beyond it (the pool has no maximum)"
        if maximum is None
        else (f"up to its maximum of {maximum}")
    )
    return f"submit with --priority LOW to borrow idle GPUs {limit}"


# -- from the configuration: one queue per pool, the same as the Queue manifests the Kubernetes
# backend syncs (a test holds them equal) ---------------------------------------------------


def pool_queues(configs: Configs) -> list[Queue]:
    """The pool queue of every pool, by backend and then pool name, as the Kubernetes backend
    names them; -1 (unlimited) is None. The parent queues are unlimited and not needed here."""
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


def min_runtimes(configs: Configs) -> dict[str, timedelta]:
    """Per pool queue, how long its work is protected from preemption and reclaim."""
    return {
        queue_name(configs.backend(pool.backend).k8s_namespace, name): timedelta(
            seconds=pool.preemption.min_runtime_seconds()
        )
        for name, pool in configs.pools().items()
        if pool.preemption.min_runtime_seconds()
    }
