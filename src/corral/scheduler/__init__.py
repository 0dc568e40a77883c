"""A pure topology-aware gang scheduler with KAI's semantics (docs/scheduler.md).

Build a :class:`ClusterSnapshot` from nodes and topology levels, call :func:`place_group` with a
stored PodGroup and its Pods, and apply the :class:`Placement` with ``snapshot.bind``.
"""

from corral.scheduler.gang import Pending, Placement, place_group, place_pod_set
from corral.scheduler.queues import Queue, QueueUsage
from corral.scheduler.snapshot import Binding, ClusterSnapshot, Domain

__all__ = [
    "Binding",
    "ClusterSnapshot",
    "Domain",
    "Pending",
    "Placement",
    "Queue",
    "QueueUsage",
    "place_group",
    "place_pod_set",
]
