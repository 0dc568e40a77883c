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
    """Bound preemptible gangs, in bind order and by node index."""

    def __init__(self, node_index: Mapping[str, int]) -> None:
        self._node_index = node_index
        self.by_key: dict[str, Running] = {}
        self.on_node: dict[int, dict[str, Running]] = {}
        self._bind_order = itertools.count()
        #: Grows whenever preemptible work is bound: a failed preemption may succeed now.
        self.generation = 0

    def add(self, key: str, bindings: tuple[Binding, ...], queue: str, since: Any) -> None:
        """Index the gang ``key``, bound now (the youngest)."""
        self._put(Running(key, bindings, queue, PREEMPTIBLE, (since, next(self._bind_order))))
        self.generation += 1

    def drop(self, key: str) -> Running | None:
        """Forget the gang ``key`` (released); what it was, or None."""
        victim = self.by_key.pop(key, None)
        if victim is None:
            return None
        for binding in victim.bindings:
            on_node = self.on_node.get(self._node_index[binding.node])
            if on_node is not None:
                on_node.pop(key, None)
        return victim

    def put_back(self, victim: Running) -> None:
        """Index ``victim`` again where it was in bind order (a :class:`Statement` undone)."""
        newest = next(reversed(self.by_key.values()), None)
        self._put(victim)
        if newest is not None and newest.since[1] > victim.since[1]:
            self.by_key = dict(sorted(self.by_key.items(), key=lambda item: item[1].since[1]))

    def _put(self, victim: Running) -> None:
        self.by_key[victim.key] = victim
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
        for victim in reversed(self._index.by_key.values()):  # youngest first
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
            victim = self._index.by_key.get(key)
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
