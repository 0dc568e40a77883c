"""The objects of the embedded (simulated) cluster, kept in the database like an API server
keeps them in etcd: created in order, applied idempotently, deleted by kind and labels.

Because the objects live in the same database as the workflows, a pod's binding and its task's
status change in one transaction, and a restarted server finds exactly what existed before. A
tick records its creations, deletions, bindings and unbindings as values
(``backends/cluster_writes.py``), and :meth:`ClusterObjectStore.write` writes them in the
transaction that records their result: a group's objects and its SCHEDULING status are stored
together or not at all. Nothing else writes the cluster's tables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select

from corral.backends.cluster_writes import ClusterWrites
from corral.domain.labels import GROUP_UUID as GROUP_LABEL
from corral.store.bulk import insert_rows, update_rows
from corral.store.database import writing
from corral.store.tables import cluster_objects

#: What names an object (the table's unique key).
_KEY = ("backend", "api_version", "kind", "namespace", "name")


@dataclass(frozen=True)
class ClusterObject:
    id: int
    backend: str
    api_version: str
    kind: str
    namespace: str
    name: str
    labels: dict[str, str]
    body: dict[str, Any]
    node: str | None
    group_uuid: str | None = None


class ClusterObjectStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock

    # -- a tick's writes (``backends/cluster_writes.py``) -----------------------------------

    def write(self, connection: Connection, writes: ClusterWrites) -> None:
        """Write a tick's recorded writes inside the caller's transaction: creations, then
        deletions, bindings and unbindings."""
        if writes.creates:
            now = self._clock()
            _insert_new(
                connection,
                [
                    _row(create.backend, manifest, create.namespace, now)
                    for create in writes.creates
                    for manifest in create.manifests
                ],
            )
        if writes.deletes:
            # By the group alone (a group's uuid is its own on every backend): with the backend
            # too, SQLite searched the unique key's index by backend, every object of it, and
            # the controller's tick grew with what is alive (2/3 of it at 10,000 workflows).
            _by_groups(connection, cluster_objects.delete(), writes.deletes)
        if writes.binds:
            ClusterObjectStore.bind_all(
                connection, [(b.backend, b.namespace, b.pod, b.node) for b in writes.binds]
            )
        if writes.unbinds:
            unbind = cluster_objects.update().where(cluster_objects.c.kind == "Pod")
            _by_groups(connection, unbind.values(node=None), writes.unbinds)

    def write_now(self, writes: ClusterWrites) -> None:
        """:meth:`write` in a transaction of its own (a backend used outside a tick)."""
        with writing(self._engine) as connection:
            self.write(connection, writes)

    # -- immediate writes -------------------------------------------------------------------

    def apply(self, backend: str, manifest: Mapping[str, Any], namespace: str) -> bool:
        """Create the object in its own namespace or else ``namespace`` (as ``kubectl apply
        -n``) unless it exists: a re-apply after a crash is a no-op. True if it was created."""
        with writing(self._engine) as connection:
            return _insert_new(connection, [_row(backend, manifest, namespace, self._clock())]) == 1

    def delete_collection(
        self,
        backend: str,
        api_version: str,
        kind: str,
        namespace: str,
        labels: Mapping[str, str],
    ) -> int:
        """Delete the objects of one kind whose labels include ``labels``; how many there were.

        ``labels`` must name the group (``osmo.group_uuid``): that is how the controller finds
        a group's objects, and the column that makes it fast."""
        group_uuid = labels[GROUP_LABEL]
        wanted = (backend, api_version, kind, namespace)
        columns = cluster_objects.c
        with writing(self._engine) as connection:
            # Found by the group's index alone, the rest compared here (see write).
            rows = connection.execute(
                select(
                    columns.id,
                    columns.backend,
                    columns.api_version,
                    columns.kind,
                    columns.namespace,
                    columns.labels,
                ).where(columns.group_uuid == group_uuid)
            ).all()
            doomed = [
                row.id
                for row in rows
                if (row.backend, row.api_version, row.kind, row.namespace) == wanted
                and _matches(row.labels, labels)
            ]
            if doomed:
                connection.execute(cluster_objects.delete().where(cluster_objects.c.id.in_(doomed)))
        return len(doomed)

    def of_group(self, group_uuid: str) -> list[ClusterObject]:
        """A group's objects in creation order."""
        return self._select(cluster_objects.c.group_uuid == group_uuid)

    def bound_pods(self) -> list[ClusterObject]:
        """Every pod bound to a node, in creation order."""
        return self._select(cluster_objects.c.node.is_not(None))

    def bound_pod_nodes(self) -> list[tuple[int, str]]:
        """(id, node) of every pod bound to a node, in creation order: what changes of the
        bound pods (an object's other columns never change once it is made)."""
        # "node > ''" (no node name is empty) rather than IS NOT NULL: SQLite then reads the
        # node index alone (9 ms for 9,000 pods) instead of every row's body (50 ms).
        # Sorted here: ORDER BY id made SQLite scan the table again.
        query = select(cluster_objects.c.id, cluster_objects.c.node).where(
            cluster_objects.c.node > ""
        )
        with self._engine.connect() as connection:
            return sorted((row[0], row[1]) for row in connection.execute(query))

    def by_ids(self, ids: Sequence[int]) -> list[ClusterObject]:
        """The objects with these ids (those that still exist)."""
        found: list[ClusterObject] = []
        for start in range(0, len(ids), 1000):
            found.extend(self._select(cluster_objects.c.id.in_(list(ids[start : start + 1000]))))
        return found

    def all(self) -> list[ClusterObject]:
        return self._select()

    @staticmethod
    def bind(
        connection: Connection, backend: str, namespace: str, nodes: Mapping[str, str]
    ) -> None:
        """Bind pods (by name) to nodes, inside the caller's transaction."""
        ClusterObjectStore.bind_all(
            connection, [(backend, namespace, pod, node) for pod, node in nodes.items()]
        )

    @staticmethod
    def bind_all(connection: Connection, bindings: Sequence[tuple[str, str, str, str]]) -> None:
        """Bind pods to nodes, given as (backend, namespace, pod, node), in one statement
        inside the caller's transaction."""
        update_rows(
            connection,
            cluster_objects,
            _KEY,
            [
                {
                    "backend": backend,
                    "api_version": "v1",
                    "kind": "Pod",
                    "namespace": namespace,
                    "name": pod,
                    "node": node,
                }
                for backend, namespace, pod, node in bindings
            ],
        )

    def _select(self, *where: Any) -> list[ClusterObject]:
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(cluster_objects).where(*where).order_by(cluster_objects.c.id)
            ).mappings()
            return [_object(row) for row in rows]


def _by_groups(connection: Connection, statement: Any, group_uuids: Sequence[str]) -> None:
    """Run ``statement`` on the objects of ``group_uuids``, a thousand groups at a time."""
    for start in range(0, len(group_uuids), 1000):
        chunk = list(group_uuids[start : start + 1000])
        connection.execute(statement.where(cluster_objects.c.group_uuid.in_(chunk)))


def _insert_new(connection: Connection, rows: list[dict[str, Any]]) -> int:
    """Insert the rows whose object does not exist yet (as ``kubectl apply`` leaves an existing
    object); how many were new."""
    return insert_rows(connection, cluster_objects, rows, skip_existing=_KEY)


def _row(
    backend: str, manifest: Mapping[str, Any], namespace: str, now: datetime
) -> dict[str, Any]:
    """The row of a new object (in its own namespace or else ``namespace``)."""
    metadata = dict(manifest.get("metadata") or {})
    metadata.setdefault("namespace", namespace)
    labels = dict(metadata.get("labels") or {})
    return {
        "backend": backend,
        "api_version": manifest["apiVersion"],
        "kind": manifest["kind"],
        "namespace": metadata["namespace"],
        "name": metadata["name"],
        "group_uuid": labels.get(GROUP_LABEL),
        "labels": labels,
        "body": {**manifest, "metadata": metadata},
        "node": None,
        "created_at": now,
    }


def _matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _object(row: Any) -> ClusterObject:
    return ClusterObject(
        id=int(row["id"]),
        backend=row["backend"],
        api_version=row["api_version"],
        kind=row["kind"],
        namespace=row["namespace"],
        name=row["name"],
        labels=dict(row["labels"]),
        body=dict(row["body"]),
        node=row["node"],
        group_uuid=row["group_uuid"],
    )
