"""A tick's unit of work (``controller.py``): what its parts record and the tick commits.

The parts of a tick (node faults, the steps, the scheduling pass, cleanup) record into one
:class:`TickWrites`: changes to the workflows' rows, and writes to the clusters whose objects
live in corral's database (a backend that ``writes_in_transaction``, given the tick's
:class:`ClusterWrites`, records its creations, deletions, bindings and unbindings there). A
part that fails half-way rolls back to its :meth:`TickWrites.checkpoint`. Only the tick
commits: everything recorded since the last commit is written in one transaction, fenced by the
lease, and the working set follows what was written only after that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.cluster_writes import Mark as ClusterMark
from corral.domain.workflows.record import Changes
from corral.store.workflows import WorkflowStore


@dataclass(frozen=True)
class Mark:
    """Where :meth:`TickWrites.rollback` goes back to."""

    changes: int
    cluster: ClusterMark


class TickWrites:
    """See the module docstring."""

    def __init__(self) -> None:
        #: Given to the tick's backends: kept (and emptied) across commits.
        self.cluster = ClusterWrites()
        self._changes: list[Changes] = []

    def record(self, changes: Changes) -> None:
        """Add ``changes`` (a later one wins per column)."""
        self._changes.append(changes)

    def checkpoint(self) -> Mark:
        return Mark(len(self._changes), self.cluster.mark())

    def rollback(self, mark: Mark) -> None:
        """Forget everything recorded since ``mark``."""
        del self._changes[mark.changes :]
        self.cluster.rollback(mark.cluster)

    def commit(
        self,
        store: WorkflowStore,
        write_cluster: Callable[[ClusterWrites], Callable[[Connection], None]],
        fence: Callable[[Connection], None] | None,
    ) -> Changes:
        """Write everything recorded since the last commit in one transaction (``fence``
        first: it may refuse it), and start again empty; the changes written."""
        changes = Changes()
        for part in self._changes:
            changes.merge(part)
        self._changes = []
        cluster = self.cluster.take()
        store.commit(changes, also=write_cluster(cluster) if cluster else None, fence=fence)
        return changes
