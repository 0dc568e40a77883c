"""The objects of the embedded (simulated) cluster, kept in the database like an API server
keeps them in etcd: created in order, applied idempotently, deleted by kind and labels.

Because the objects live in the same database as the workflows, a pod's binding and its task's
status change in one transaction, and a restarted server finds exactly what existed before. The
controller stages a tick's creations and deletions (:meth:`ClusterObjectStore.stage_apply`,
:meth:`ClusterObjectStore.stage_delete`) and writes them in the transaction that records their
result (:meth:`ClusterObjectStore.write_staged`): a group's objects and its SCHEDULING status
are stored together or not at all. Binding pods to nodes and unbinding an evicted gang's pods
are writes of this module too (:meth:`ClusterObjectStore.binding`,
:meth:`ClusterObjectStore.unbinding`), handed to the controller for its transaction: nothing
else writes the cluster's tables.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine, select

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


@dataclass
class _Staged:
    """What a thread staged: rows to create, and (backend, group uuids) to delete."""

    rows: list[dict[str, Any]]
    deletes: list[tuple[str, list[str]]]


class ClusterObjectStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock
        self._local = threading.local()

    # -- staged writes (the controller's) ---------------------------------------------------

    def _staged(self) -> _Staged:
        staged: _Staged | None = getattr(self._local, "staged", None)
        if staged is None:
            staged = self._local.staged = _Staged([], [])
        return staged

    def stage_apply(
        self, backend: str, manifests: Sequence[Mapping[str, Any]], namespace: str
    ) -> None:
        """Create the objects (unless they exist) in the calling thread's next
        :meth:`write_staged`."""
        now = self._clock()
        self._staged().rows.extend(_row(backend, m, namespace, now) for m in manifests)

    def stage_delete(self, backend: str, group_uuids: Sequence[str]) -> None:
        """Delete every object of the groups in the calling thread's next :meth:`write_staged`."""
        if group_uuids:
            self._staged().deletes.append((backend, list(group_uuids)))

    def has_staged(self) -> bool:
        return self.staged_mark() != (0, 0)

    def staged_mark(self) -> tuple[int, int]:
        staged = self._staged()
        return len(staged.rows), len(staged.deletes)

    def unstage(self, mark: tuple[int, int]) -> None:
        """Forget what was staged after ``mark`` (a step that failed half-way)."""
        staged = self._staged()
        del staged.rows[mark[0] :]
        del staged.deletes[mark[1] :]

    def write_staged(self, connection: Connection) -> None:
        """Write what the calling thread staged, inside the caller's transaction."""
        staged = self._staged()
        self._local.staged = None
        if staged.rows:
            _insert_new(connection, staged.rows)
        for _, uuids in staged.deletes:
            # By the group alone (a group's uuid is its own on every backend): with the backend
            # too, SQLite searched the unique key's index by backend, every object of it, and
            # the controller's tick grew with what is alive (2/3 of it at 10,000 workflows).
            connection.execute(
                cluster_objects.delete().where(cluster_objects.c.group_uuid.in_(uuids))
            )

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
            # Found by the group's index alone, the rest compared here (see write_staged).
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

    def binding(
        self, bindings: Sequence[tuple[str, str, str, str]]
    ) -> Callable[[Connection], None]:
        """The write that binds pods to nodes, (backend, namespace, pod, node) each, for the
        controller's transaction."""
        return partial(ClusterObjectStore.bind_all, bindings=bindings)

    def unbinding(self, group_uuids: Sequence[str]) -> Callable[[Connection], None]:
        """The write that unbinds every pod of the groups (evicted), for the controller's
        transaction."""
        return partial(ClusterObjectStore.unbind_groups, group_uuids=group_uuids)

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

    @staticmethod
    def unbind_groups(connection: Connection, group_uuids: Sequence[str]) -> None:
        """Unbind every pod of the groups (evicted by the scheduler), inside the caller's
        transaction."""
        for start in range(0, len(group_uuids), 1000):
            connection.execute(
                cluster_objects.update()
                .where(
                    cluster_objects.c.group_uuid.in_(list(group_uuids[start : start + 1000])),
                    cluster_objects.c.kind == "Pod",
                )
                .values(node=None)
            )

    def _select(self, *where: Any) -> list[ClusterObject]:
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(cluster_objects).where(*where).order_by(cluster_objects.c.id)
            ).mappings()
            return [_object(row) for row in rows]


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
