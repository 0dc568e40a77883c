"""A scheduler statement (KAI's ``framework/statement.go``): evictions and allocations done on
the scheduler cache one after another, each seen by the next, then kept or undone as one.

A preemption search tries a victim set by evicting it in a statement, placing the preemptor on
the snapshot, and discarding the statement; the pass then commits the chosen set in another.
Defragmentation tries many sets the same way. Nothing is released and bound again by hand: an
undone eviction puts its gang back exactly as it was (in every snapshot, its queue's counts, its
place among the victims, its checkpoint, the cache's generations), and an undone allocation
takes its group out again, so a discarded statement leaves the cache as it found it
(``tests/scheduler/test_statement.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import TracebackType

from corral.scheduler.cache import SchedulerCache, Unbound
from corral.scheduler.gang import Placement


@dataclass(frozen=True)
class Eviction:
    """A bound group taken out of the cache, and how to put it back."""

    key: str
    unbound: Unbound


@dataclass(frozen=True)
class Allocation:
    """A group bound where ``placement`` says, and the cache's counts before it."""

    key: str
    placement: Placement
    generations: tuple[int, int]
    queue_counts: tuple[int, int] | None


Operation = Eviction | Allocation


class StatementClosed(RuntimeError):
    """The statement was committed or discarded: start another."""


class Statement:
    """Operations on ``cache`` since the statement began; see the module docstring. Used as a
    context manager, it is discarded unless committed inside the block."""

    def __init__(self, cache: SchedulerCache) -> None:
        self._cache = cache
        self._done: list[Operation] = []
        self._open = True

    def evict(self, key: str) -> Eviction | None:
        """Take bound group ``key`` out (its capacity given back); None if it holds nothing."""
        self._check_open()
        unbound = self._cache.unbind(key)
        if unbound is None:
            return None
        eviction = Eviction(key, unbound)
        self._done.append(eviction)
        return eviction

    def allocate(
        self, key: str, placement: Placement, *, preemptible: bool, now: datetime | None = None
    ) -> Allocation:
        """Bind group ``key`` where ``placement`` says, charged to its queue."""
        self._check_open()
        cache = self._cache
        allocation = Allocation(
            key,
            placement,
            (cache.generation, cache.victim_index.generation),
            cache.usage.counts(placement.queue),
        )
        cache.take(key, placement, preemptible=preemptible, now=now)
        self._done.append(allocation)
        return allocation

    def checkpoint(self) -> int:
        """A mark to :meth:`rollback` to."""
        self._check_open()
        return len(self._done)

    def rollback(self, mark: int) -> None:
        """Undo every operation since :meth:`checkpoint` answered ``mark``, the latest first."""
        self._check_open()
        while len(self._done) > mark:
            self._undo(self._done.pop())

    def discard(self) -> None:
        """Undo every operation: the cache is as the statement found it."""
        self.rollback(0)
        self._open = False

    def commit(self) -> tuple[Operation, ...]:
        """Keep every operation; what they were, in order."""
        self._check_open()
        self._open = False
        return tuple(self._done)

    def _undo(self, operation: Operation) -> None:
        cache = self._cache
        if isinstance(operation, Eviction):
            cache.rebind(operation.unbound)
            return
        cache.unbind(operation.key)
        if operation.queue_counts is not None:
            cache.usage.restore(operation.placement.queue, operation.queue_counts)
        cache.generation, cache.victim_index.generation = operation.generations

    def _check_open(self) -> None:
        if not self._open:
            raise StatementClosed("this statement was committed or discarded")

    def __enter__(self) -> Statement:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._open:
            self.discard()
