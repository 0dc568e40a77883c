"""Queues: one per pool, with a GPU ``guarantee``, ``maximum`` and ``weight`` (KAI's Queue).

Only the maximum is enforced here: a PodGroup whose GPUs would push its queue over its maximum
stays pending. Guarantee and weight order pending groups across queues (fair share); that
ordering is in ``fair_share.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Queue:
    name: str
    gpu_guarantee: int = 0
    gpu_maximum: int | None = None  # None: no limit
    weight: int = 1


class QueueUsage:
    """GPUs in use per queue, charged when a placement is bound and refunded on release."""

    def __init__(self, queues: Iterable[Queue]) -> None:
        self.queues = {queue.name: queue for queue in queues}
        self.used: dict[str, int] = dict.fromkeys(self.queues, 0)

    def refusal(self, queue: str, gpus: int) -> str | None:
        """Why ``gpus`` more GPUs may not be used by ``queue`` now, or None."""
        found = self.queues.get(queue)
        if found is None:
            return f"queue {queue!r} does not exist; the pool's queue must be configured first"
        limit = found.gpu_maximum
        if limit is not None and self.used[queue] + gpus > limit:
            return (
                f"queue {queue} would use {self.used[queue] + gpus} GPUs, over its maximum of "
                f"{limit} ({self.used[queue]} in use)"
            )
        return None

    def charge(self, queue: str, gpus: int) -> None:
        reason = self.refusal(queue, gpus)
        if reason:
            raise ValueError(reason)
        self.used[queue] += gpus

    def refund(self, queue: str, gpus: int) -> None:
        if gpus > self.used.get(queue, 0):
            raise ValueError(f"queue {queue} has only {self.used.get(queue, 0)} GPUs in use")
        self.used[queue] -= gpus
