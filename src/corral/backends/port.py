"""The Backend port: what the lifecycle controller asks of a cluster, whether it is the embedded
one (objects in the database, corral's scheduler, local tasks) or a real Kubernetes cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from corral.backends.execution import TaskExecutor
from corral.backends.kubernetes.rbac import Rule


class BackendError(Exception):
    """The cluster refused or did not answer. ``transient``: the same request may succeed
    later (retry); otherwise it fails the same way again."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


class ClusterBackend(Protocol):
    name: str
    #: True: the cluster's own scheduler (KAI) places pods; False: corral's scheduling pass.
    schedules_itself: bool

    def apply(self, manifest: Mapping[str, Any], namespace: str) -> None:
        """Create the object unless it exists; returns once the cluster accepted it."""

    def delete_collection(
        self, api_version: str, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> int:
        """Delete the objects of one kind with ``labels``; how many there were."""

    def executor(self) -> TaskExecutor: ...

    def missing_rules(self, kinds: Sequence[Sequence[str]], namespace: str) -> list[Rule]:
        """RBAC rules corral lacks to manage ``kinds`` in ``namespace`` (none: all granted)."""

    def missing_priority_classes(self, names: Sequence[str]) -> list[str]:
        """The PriorityClasses of ``names`` the cluster does not have (none: all there)."""
