"""The scheduler cache's index of victims (docs/scheduler.md#queues-priorities-and-preemption):
bound LOW gangs in bind order (youngest last) and by node, so a preemption search starts from
the youngest and visits a region's nodes only; and :class:`Candidates`, the view a search takes
them from (``preemption.Victims``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Set
from datetime import datetime
from typing import Any

from corral.scheduler.lost_work import LostWork, lost_work
from corral.scheduler.running import PREEMPTIBLE, Running
from corral.scheduler.snapshot import Binding


class VictimIndex:
    """Bound preemptible gangs, in bind order and by node index.

    A dropped gang leaves a tombstone in the bind order, so that putting it back (a
    :class:`~corral.scheduler.statement.Statement` undone, once per victim set a preemption
    tries) costs what one gang does, not a sort of every victim; tombstones are swept once
    they are half of the order."""

    def __init__(self, node_index: Mapping[str, int]) -> None:
        self._node_index = node_index
        #: Every gang indexed, in bind order, with the tombstones of those dropped since.
        self._order: dict[str, Running] = {}
        self._gone: set[str] = set()
        self.on_node: dict[int, dict[str, Running]] = {}
        self._bind_order = itertools.count()
        #: Grows whenever preemptible work is bound: a failed preemption may succeed now.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._order) - len(self._gone)

    def get(self, key: str) -> Running | None:
        return None if key in self._gone else self._order.get(key)

    def in_bind_order(self) -> Iterator[Running]:
        """The gangs indexed, oldest first."""
        return (v for k, v in self._order.items() if k not in self._gone)

    def youngest_first(self) -> Iterator[Running]:
        return (v for k, v in reversed(self._order.items()) if k not in self._gone)

    def add(self, key: str, bindings: tuple[Binding, ...], queue: str, since: Any) -> None:
        """Index the gang ``key``, bound now (the youngest)."""
        if key in self._gone:  # bound again since it was dropped: it is the youngest now
            self._gone.discard(key)
            del self._order[key]
        victim = Running(key, bindings, queue, PREEMPTIBLE, (since, next(self._bind_order)))
        self._order[key] = victim
        self._put_on_nodes(victim)
        self.generation += 1

    def drop(self, key: str) -> Running | None:
        """Forget the gang ``key`` (released); what it was, or None."""
        victim = self.get(key)
        if victim is None:
            return None
        self._gone.add(key)
        for binding in victim.bindings:
            on_node = self.on_node.get(self._node_index[binding.node])
            if on_node is not None:
                on_node.pop(key, None)
        if len(self._gone) > 64 and 2 * len(self._gone) > len(self._order):
            self._order = {k: v for k, v in self._order.items() if k not in self._gone}
            self._gone.clear()
        return victim

    def put_back(self, victim: Running) -> None:
        """Index ``victim`` again where it was in bind order (a :class:`Statement` undone)."""
        key = victim.key
        if key in self._gone:
            self._gone.discard(key)
        else:  # swept since: its place is found again
            self._order[key] = victim
            order = self._order
            self._order = dict(sorted(order.items(), key=lambda item: item[1].since[1]))
        self._put_on_nodes(victim)

    def _put_on_nodes(self, victim: Running) -> None:
        for binding in victim.bindings:
            self.on_node.setdefault(self._node_index[binding.node], {})[victim.key] = victim


class Candidates:
    """The victims a preemption may take (``preemption.Victims``) from the cache's index: not
    placed in this pass, and past their queue's minimum runtime. Notes when the protected ones
    become candidates."""

    def __init__(
        self,
        index: VictimIndex,
        checkpoints: Mapping[str, datetime],
        freshest: Callable[[], Iterator[str]],
        protected_until: Callable[[Running, datetime | None], datetime | None],
        now: datetime | None,
        placed_now: Set[str],
    ) -> None:
        self._index = index
        self._checkpoints = checkpoints
        self._freshest = freshest
        self._protected_until = protected_until
        self._now = now
        self._placed_now = placed_now
        self.protected_until: list[datetime] = []

    def unprotected(self) -> Iterator[Running]:
        for victim in self._index.youngest_first():
            if victim.key in self._placed_now:
                continue  # placed in this pass: it has not even started
            until = self._protected_until(victim, self._now)
            if until is None:
                yield victim
            else:
                self.protected_until.append(until)

    def lost_work(self) -> LostWork:
        """What each victim would lose if evicted now; None when no group has reported a
        checkpoint (the choice is then by GPUs, priority and age alone)."""
        if self._now is None:
            return None
        return lost_work(self._now, self._checkpoints)

    def freshest(self) -> Iterator[Running]:
        """The candidates that reported checkpoints, the latest first."""
        for key in self._freshest():
            victim = self._index.get(key)
            if victim is None or key in self._placed_now:
                continue
            if self._protected_until(victim, self._now) is None:
                yield victim

    def on_node(self, node: int) -> list[Running]:
        bound = self._index.on_node.get(node)
        if not bound:  # most nodes: asked for every node of a region, so answered first
            return []
        return [
            victim
            for victim in bound.values()
            if victim.key not in self._placed_now
            and self._protected_until(victim, self._now) is None
        ]
