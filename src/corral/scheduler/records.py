"""What the embedded scheduler's cache and pass work on and answer (``cache.py``,
``cycle.py``): bound pods, shapes and waiting groups, and the result of a pass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.domain.topology.fabric import NO_FABRIC_RULE, FabricRule
from corral.scheduler import Placement
from corral.scheduler.fair_share import PRIORITY_RANK
from corral.scheduler.podgroup import PodSet
from corral.scheduler.resources import Demand
from corral.scheduler.running import Running

#: ``Shape.failed_at`` of a shape whose PodGroup cannot be read: never tried.
NEVER = (-1,)


@dataclass(frozen=True)
class BoundPodOnNode:
    """A pod of the embedded cluster bound to a node: what it takes, whose it is."""

    name: str
    node: str
    group_uuid: str | None  # None: not a task group's (no osmo.group_uuid label)
    labels: Mapping[str, str]
    spec: Mapping[str, Any]
    #: What ``spec`` requests, when the caller computed it already.
    demand: Demand | None = None


@dataclass
class Shape:
    """What the groups of one shape ask for; ``root`` was read from the first of them, so its
    pods carry that group's names."""

    key: str
    root: PodSet | None  # None: the PodGroup cannot be read (``reason`` says why)
    levels: tuple[str, ...]
    queue: str
    low: bool
    #: The pool's NVLink level and whether a gang may use a degraded domain of it.
    fabric: FabricRule = NO_FABRIC_RULE
    #: The generations (``SchedulerCache._stamp``) at which a group of this shape last failed to be
    #: placed (:data:`NEVER`: it cannot be), and why.
    failed_at: tuple[int, ...] | None = None
    reason: str | None = None
    #: When work that protected its victims may be evicted (a failed preemption is tried again
    #: then, even if nothing else changed).
    retry_at: datetime | None = None
    #: The reason as the store has it.
    reason_written: str | None = None

    @property
    def pod_names(self) -> tuple[str, ...]:
        return () if self.root is None else tuple(pod.name for pod in self.root.all_pods())


@dataclass(frozen=True)
class WaitingGroup:
    """A task group in SCHEDULING on the embedded cluster."""

    key: str  # the group uuid
    shape: Shape
    #: Its pods' names, in the order of ``shape.root.all_pods()``.
    pod_names: tuple[str, ...]
    priority: str
    age: tuple[Any, ...]  # sorts older groups first

    @property
    def queue(self) -> str:
        return self.shape.queue

    def order(self) -> tuple[int, tuple[Any, ...], str]:
        return (PRIORITY_RANK.get(self.priority, 1), self.age, self.key)


@dataclass(frozen=True)
class Placed:
    group: WaitingGroup
    placement: Placement  # with the group's own pod names


@dataclass(frozen=True)
class Evicted:
    """A running gang evicted for ``by`` (a group uuid) in ``queue``: reclaimed (its queue
    borrowed above its guarantee) or preempted (same queue, lower priority)."""

    group: str
    by: str
    queue: str
    reclaimed: bool
    gpus: int


@dataclass(frozen=True)
class Preemption:
    """Where the preemptor goes once ``victims`` are evicted."""

    placement: Placement
    victims: tuple[Running, ...]
    region: str  # the id of the domain freed ("cluster" without a required level)
    #: The GPU-seconds the victims lose (0 when nothing is weighed), and those of every other
    #: victim set the search placed the preemptor with.
    lost_gpu_seconds: float = 0.0
    alternatives: tuple[float, ...] = ()

    @property
    def evicted_gpus(self) -> int:
        return sum(victim.gpus for victim in self.victims)


@dataclass
class PassResult:
    placed: list[Placed] = field(default_factory=list)
    #: Gangs evicted for groups placed in this pass (before those placements).
    evicted: list[Evicted] = field(default_factory=list)
    #: Each preemption made (the preemptor's key): its victims and the work they lose, and
    #: what the other victim sets it weighed would have lost.
    preemptions: list[tuple[str, Preemption]] = field(default_factory=list)
    #: Shapes whose reason changed in this pass.
    reasons: list[Shape] = field(default_factory=list)
    tries: int = 0
