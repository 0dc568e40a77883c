"""A tick's unit of work (``services/lifecycle/unit.py``): what is recorded after a checkpoint
is forgotten by a rollback, a commit writes everything recorded since the last one in one call
(the cluster writes with it, only when there are any), and the unit starts again empty."""

from __future__ import annotations

import functools
from typing import Any, cast

from corral.backends.cluster_writes import ClusterWrites
from corral.domain.workflows.record import Changes
from corral.services.lifecycle.unit import TickWrites
from corral.store.workflows import WorkflowStore


class Store:
    """Records each commit: the changes, the cluster writes given, whether fenced."""

    def __init__(self) -> None:
        self.commits: list[tuple[Changes, ClusterWrites | None, bool]] = []

    def commit(self, changes: Changes, also: Any = None, fence: Any = None) -> None:
        self.commits.append((changes, also.keywords["writes"] if also else None, fence is not None))


def _no_write(connection: Any, writes: ClusterWrites) -> None:
    """Never called: the fake store writes nothing (the writes are read from its keywords)."""


def commit(unit: TickWrites, store: Store) -> Changes:
    def write_cluster(cluster: ClusterWrites) -> Any:
        return functools.partial(_no_write, writes=cluster)

    return unit.commit(cast(WorkflowStore, store), write_cluster, fence=lambda connection: None)


def changed(group: str, **values: Any) -> Changes:
    found = Changes()
    found.group(group, **values)
    return found


def test_a_rollback_forgets_what_was_recorded_after_its_checkpoint() -> None:
    unit = TickWrites()
    unit.record(changed("a", status="SCHEDULING"))
    unit.cluster.create("default", [{"kind": "Pod", "metadata": {"name": "a-0"}}], "ns")
    mark = unit.checkpoint()
    unit.record(changed("b", status="SCHEDULING"))
    unit.cluster.create("default", [{"kind": "Pod", "metadata": {"name": "b-0"}}], "ns")
    unit.cluster.bind("default", "ns", {"b-0": "node-1"})
    unit.cluster.unbinds.append("c")
    unit.rollback(mark)
    store = Store()
    done = commit(unit, store)
    ((changes, cluster, fenced),) = store.commits
    assert changes is done and changes.groups == {"a": {"status": "SCHEDULING"}}
    assert cluster is not None and fenced
    assert [m["metadata"]["name"] for c in cluster.creates for m in c.manifests] == ["a-0"]
    assert (cluster.binds, cluster.unbinds, cluster.deletes) == ([], [], [])


def test_a_commit_merges_in_order_and_leaves_the_unit_empty() -> None:
    unit = TickWrites()
    backend_writes = unit.cluster  # what the tick's backends hold
    unit.record(changed("a", status="RUNNING", message="x"))
    unit.record(changed("a", status="COMPLETED"))
    store = Store()
    commit(unit, store)
    assert store.commits[0][0].groups == {"a": {"status": "COMPLETED", "message": "x"}}
    assert store.commits[0][1] is None  # no cluster writes: none given to the store
    backend_writes.deletes.append("a")  # the same object keeps recording for the next commit
    commit(unit, store)
    assert store.commits[1][0].empty and store.commits[1][1] == ClusterWrites(deletes=["a"])
    assert not unit.cluster and unit.cluster is backend_writes
