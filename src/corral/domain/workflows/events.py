"""What the controller records once and never changes: a gang evicted by the scheduler, a group
a node fault stopped, a gang stopped after its notice. Each is a typed event in the tick's
:class:`Changes`; ``store/workflows/events.py`` maps it to its table's row, so a misspelt field
fails in mypy, not in the database."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class StopCause(StrEnum):
    """Why corral stopped a gang that was running (docs/checkpoints.md)."""

    PREEMPTED = "preempted"
    RECLAIMED = "reclaimed"
    DRAINED = "drained"


@dataclass(frozen=True)
class GangEvicted:
    """A running gang the scheduler evicted (``preemptions``): for a group of higher priority,
    or for a queue reclaiming its guarantee."""

    at: datetime
    pool: str
    workflow_id: str
    group_uuid: str
    gpus: int
    by_workflow: str
    reclaimed: bool


@dataclass(frozen=True)
class NodeFaulted:
    """A group a failed node under it stopped (``node_faults``): the GPU-seconds it lost."""

    at: datetime
    pool: str
    workflow_id: str
    group_uuid: str
    node: str
    reason: str
    gpus: int
    gpu_seconds: float


@dataclass(frozen=True)
class GangStopped:
    """An evicted gang stopped after its notice (``eviction_stops``): the GPU-seconds since its
    last checkpoint, whether every task said it was ready, and how long the stop took."""

    at: datetime
    pool: str
    workflow_id: str
    group_uuid: str
    cause: StopCause
    gpus: int
    lost_gpu_seconds: float
    acknowledged: bool
    stop_seconds: float
