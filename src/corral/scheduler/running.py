"""A bound gang as preemption sees it (docs/scheduler.md#queues-priorities-and-preemption): the
victims the cache indexes, a preemption search weighs, and a :class:`Statement` evicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corral.scheduler.fair_share import PRIORITY_RANK
from corral.scheduler.snapshot import Binding

#: The priority whose work may be evicted (KAI: a priority class below 100).
PREEMPTIBLE = "LOW"


@dataclass(frozen=True, eq=False)
class Running:
    """A bound gang that preemption may consider."""

    key: str  # the group's uuid
    bindings: tuple[Binding, ...]
    queue: str
    priority: str
    #: Sorts older gangs first (when it was bound); younger gangs are evicted first.
    since: Any
    gpus: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", sum(b.demand.gpu for b in self.bindings))

    @property
    def rank(self) -> int:
        return PRIORITY_RANK.get(self.priority, 1)
