"""The order in which waiting task groups are offered to the scheduler (KAI's fair share).

Queues first — a queue below its GPU ``guarantee`` (or without one) before one at or above it;
among those below, the one using the fewest GPUs per unit of ``weight``; among those above, the
one borrowing the fewest GPUs above its guarantee per unit of ``weight`` (KAI's over-quota
share) — and inside a queue HIGH before NORMAL before LOW, older before newer. A group that does
not fit does not block the ones behind it (the caller offers every group in turn).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

from corral.scheduler.queues import QueueUsage

PRIORITY_RANK = {"HIGH": 0, "NORMAL": 1, "LOW": 2}


class Contender(Protocol):
    """What the order reads of a waiting group."""

    @property
    def queue(self) -> str: ...

    @property
    def priority(self) -> str: ...

    @property
    def age(self) -> tuple[Any, ...]: ...


C = TypeVar("C", bound=Contender)


def fair_share_order(waiting: Iterable[C], usage: QueueUsage) -> list[C]:
    """``waiting`` in the order to offer it, with the queues' usage as it stands now."""
    return sorted(
        waiting,
        key=lambda g: (queue_share(usage, g.queue), PRIORITY_RANK.get(g.priority, 1), g.age),
    )


def queue_share(usage: QueueUsage, queue: str) -> tuple[int, float]:
    """A queue's place: (0 below its guarantee else 1, GPUs used — above the guarantee, when
    at or above it — per unit of weight)."""
    found = usage.queues.get(queue)
    if found is None:
        return (1, 0.0)
    used = usage.used[queue]
    guarantee = found.gpu_guarantee
    below_guarantee = guarantee is None or used < guarantee
    share = used if below_guarantee else usage.borrowed(queue)
    per_weight = share / found.weight if found.weight else float("inf")
    return (0 if below_guarantee else 1, per_weight)
