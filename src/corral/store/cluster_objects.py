"""The objects of the embedded (simulated) cluster, kept in the database like an API server
keeps them in etcd: created in order, applied idempotently, deleted by kind and labels.

Because the objects live in the same database as the workflows, a pod's binding and its task's
status change in one transaction, and a restarted server finds exactly what existed before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, select

from corral.domain.labels import GROUP_UUID as GROUP_LABEL
from corral.store.database import writing
from corral.store.tables import cluster_objects


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


class ClusterObjectStore:
    def __init__(self, engine: Engine, clock: Callable[[], datetime]) -> None:
        self._engine = engine
        self._clock = clock

    def apply(self, backend: str, manifest: Mapping[str, Any], namespace: str) -> bool:
        """Create the object in its own namespace or else ``namespace`` (as ``kubectl apply
        -n``) unless it exists: a re-apply after a crash is a no-op. True if it was created."""
        metadata = dict(manifest.get("metadata") or {})
        metadata.setdefault("namespace", namespace)
        manifest = {**manifest, "metadata": metadata}
        key = _key(backend, manifest)
        with writing(self._engine) as connection:
            if connection.execute(select(cluster_objects.c.id).where(*key)).first():
                return False
            labels = dict(metadata.get("labels") or {})
            connection.execute(
                cluster_objects.insert().values(
                    backend=backend,
                    api_version=manifest["apiVersion"],
                    kind=manifest["kind"],
                    namespace=metadata["namespace"],
                    name=metadata["name"],
                    group_uuid=labels.get(GROUP_LABEL),
                    labels=labels,
                    body=dict(manifest),
                    node=None,
                    created_at=self._clock(),
                )
            )
        return True

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
        with writing(self._engine) as connection:
            rows = connection.execute(
                select(cluster_objects.c.id, cluster_objects.c.labels).where(
                    cluster_objects.c.backend == backend,
                    cluster_objects.c.api_version == api_version,
                    cluster_objects.c.kind == kind,
                    cluster_objects.c.namespace == namespace,
                    cluster_objects.c.group_uuid == group_uuid,
                )
            ).all()
            doomed = [row.id for row in rows if _matches(row.labels, labels)]
            if doomed:
                connection.execute(cluster_objects.delete().where(cluster_objects.c.id.in_(doomed)))
        return len(doomed)

    def of_group(self, group_uuid: str) -> list[ClusterObject]:
        """A group's objects in creation order."""
        return self._select(cluster_objects.c.group_uuid == group_uuid)

    def bound_pods(self) -> list[ClusterObject]:
        """Every pod bound to a node, in creation order."""
        return self._select(cluster_objects.c.node.is_not(None))

    def all(self) -> list[ClusterObject]:
        return self._select()

    @staticmethod
    def bind(
        connection: Connection, backend: str, namespace: str, nodes: Mapping[str, str]
    ) -> None:
        """Bind pods (by name) to nodes, inside the caller's transaction."""
        for pod, node in nodes.items():
            connection.execute(
                cluster_objects.update()
                .where(
                    cluster_objects.c.backend == backend,
                    cluster_objects.c.api_version == "v1",
                    cluster_objects.c.kind == "Pod",
                    cluster_objects.c.namespace == namespace,
                    cluster_objects.c.name == pod,
                )
                .values(node=node)
            )

    def _select(self, *where: Any) -> list[ClusterObject]:
        with self._engine.connect() as connection:
            rows = connection.execute(
                select(cluster_objects).where(*where).order_by(cluster_objects.c.id)
            ).mappings()
            return [_object(row) for row in rows]


def _key(backend: str, manifest: Mapping[str, Any]) -> Sequence[Any]:
    metadata = manifest["metadata"]
    return (
        cluster_objects.c.backend == backend,
        cluster_objects.c.api_version == manifest["apiVersion"],
        cluster_objects.c.kind == manifest["kind"],
        cluster_objects.c.namespace == metadata["namespace"],
        cluster_objects.c.name == metadata["name"],
    )


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
    )
