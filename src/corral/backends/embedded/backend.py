"""The embedded cluster as a backend: objects in the database (``cluster_objects``, as an API
server keeps them in etcd), placed by corral's own scheduling pass, tasks run by the backend's
executor (simulated, or local processes).

The objects live in corral's own database, so the backend ``writes_in_transaction``: given a
tick's :class:`ClusterWrites`, creating and deleting a group's objects and binding and unbinding
its pods are recorded there and written in the controller's transaction that records the result
(``services/lifecycle/unit.py``): the group's objects and its status change together. Without
one (outside a tick), each is written at once."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corral.backends.cluster_writes import ClusterWrites
from corral.backends.embedded.objects import ClusterObjectStore
from corral.backends.execution import TaskExecutor
from corral.backends.port import GroupObjects, LiveCluster, Rule


class EmbeddedBackend:
    """The embedded cluster: objects in the database, placed by corral's scheduling pass."""

    schedules_itself = False
    takes_task_tokens = False  # a local task speaks through its control directory
    writes_in_transaction = True

    def __init__(
        self,
        name: str,
        objects: ClusterObjectStore,
        executor: TaskExecutor,
        writes: ClusterWrites | None = None,
    ) -> None:
        self.name = name
        self._objects = objects
        self._executor = executor
        self._writes = writes

    def _write(self, record: Callable[[ClusterWrites], None]) -> None:
        """Record a write in the tick's writes, or (outside a tick) write it at once."""
        if self._writes is not None:
            record(self._writes)
            return
        batch = ClusterWrites()
        record(batch)
        self._objects.write_now(batch)

    def apply(self, manifest: Mapping[str, Any], namespace: str) -> None:
        self._objects.apply(self.name, manifest, namespace)

    def apply_all(
        self,
        manifests: Sequence[Mapping[str, Any]],
        namespace: str,
        task_tokens: Mapping[str, str] | None = None,
    ) -> None:
        """``task_tokens`` are not used: the objects are stored, and a local task speaks
        through its control directory instead."""
        self._write(lambda writes: writes.create(self.name, manifests, namespace))

    def delete_groups(self, groups: Sequence[GroupObjects]) -> list[str]:
        """One statement: on the embedded cluster, each object a group was given carries its
        ``osmo.group_uuid`` label (the column deleted by)."""
        uuids = [group.uuid for group in groups]
        self._write(lambda writes: writes.deletes.extend(uuids))
        return uuids

    def bind(self, namespace: str, nodes: Mapping[str, str]) -> None:
        self._write(lambda writes: writes.bind(self.name, namespace, nodes))

    def unbind(self, group_uuids: Sequence[str]) -> None:
        self._write(lambda writes: writes.unbinds.extend(group_uuids))

    def delete_collection(
        self, api_version: str, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> int:
        return self._objects.delete_collection(self.name, api_version, kind, namespace, labels)

    def executor(self) -> TaskExecutor:
        return self._executor

    def missing_rules(self, kinds: Sequence[Sequence[str]], namespace: str) -> list[Rule]:
        del kinds, namespace  # nothing to be refused by
        return []

    def missing_priority_classes(self, names: Sequence[str]) -> list[str]:
        del names  # the embedded scheduler orders by the workflow's priority itself
        return []

    def placement(
        self, namespace: str, pod_names: Sequence[str], pod_group: str | None
    ) -> dict[str, str] | str | None:
        del namespace, pod_names, pod_group  # corral's scheduling pass places these groups
        return None

    def sync_scheduler_objects(self, desired: Sequence[Mapping[str, Any]]) -> bool:
        del desired  # the scheduling pass reads the queues from the pools directly
        return False

    def live_cluster(self, wait_seconds: float) -> LiveCluster | None:
        del wait_seconds  # its nodes are the cluster description's
        return None
